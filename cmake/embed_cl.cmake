# Embed the OpenCL kernel sources into one C file: the files' bytes, concatenated in the order
# given, as an unsigned char array (hex, so no escaping rules of C string literals apply) plus
# its length. Run as: cmake -DOUT=file.c "-DSOURCES=a.cl|b.cl" -P embed_cl.cmake
string(REPLACE "|" ";" SOURCES "${SOURCES}")
set(body "")
foreach(src ${SOURCES})
  file(READ ${src} hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
  get_filename_component(name ${src} NAME)
  string(APPEND body "/* ${name} */\n${hex}0x0a,\n")
endforeach()
file(WRITE ${OUT}.tmp "/* generated from the .cl files of src/devices/opencl/kernels by cmake/embed_cl.cmake: do not edit */\n"
     "#include <stddef.h>\n"
     "const unsigned char qhx_ocl_kernel_source[] = {\n${body}0x00};\n"
     "const size_t qhx_ocl_kernel_source_len = sizeof qhx_ocl_kernel_source - 1;\n")
file(RENAME ${OUT}.tmp ${OUT})
