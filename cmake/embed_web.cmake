# Embed qhx serve's web chat page (tools/qhx/serve/web/index.html) into one C file: the page's
# bytes as an unsigned char array (hex, as embed_cl.cmake does), its length, and the
# Content-Security-Policy it is served with. The page's one inline <script> and one inline <style>
# are allowed by their SHA-256 hashes (computed here, so the policy follows every edit of the
# page) and nothing else is: no other script, style, font, frame or origin.
# Run as: cmake -DOUT=file.c -DSOURCE=index.html -P embed_web.cmake

# base64 of the bytes a hex string spells (CMake has no base64 of its own)
function(hex_to_base64 hex out)
  set(abc "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
  string(LENGTH "${hex}" n)
  set(b64 "")
  set(i 0)
  while(i LESS n)
    math(EXPR left "${n} - ${i}")
    if(left GREATER 6)
      set(left 6)
    endif()
    string(SUBSTRING "${hex}" ${i} ${left} group)
    math(EXPR pad "(6 - ${left}) / 2") # bytes missing from this group of three
    if(pad EQUAL 1)
      set(group "${group}00")
    elseif(pad EQUAL 2)
      set(group "${group}0000")
    endif()
    math(EXPR v "0x${group}")
    math(EXPR keep "4 - ${pad}")
    foreach(shift 18 12 6 0)
      if(keep GREATER 0)
        math(EXPR d "(${v} >> ${shift}) & 63")
        string(SUBSTRING "${abc}" ${d} 1 ch)
        string(APPEND b64 "${ch}")
        math(EXPR keep "${keep} - 1")
      else()
        string(APPEND b64 "=")
      endif()
    endforeach()
    math(EXPR i "${i} + 6")
  endwhile()
  set(${out} "${b64}" PARENT_SCOPE)
endfunction()

# 'sha256-...' of the text between the page's <tag> and </tag> (exactly one of each)
function(inline_hash page tag out)
  string(FIND "${page}" "<${tag}>" open)
  string(FIND "${page}" "</${tag}>" close)
  string(FIND "${page}" "<${tag}>" open_last REVERSE)
  if(open EQUAL -1 OR close EQUAL -1 OR NOT open EQUAL open_last)
    message(FATAL_ERROR "${SOURCE}: the page needs exactly one <${tag}> ... </${tag}>")
  endif()
  string(LENGTH "<${tag}>" k)
  math(EXPR from "${open} + ${k}")
  math(EXPR len "${close} - ${from}")
  string(SUBSTRING "${page}" ${from} ${len} text)
  string(SHA256 hex "${text}")
  hex_to_base64(${hex} b64)
  set(${out} "'sha256-${b64}'" PARENT_SCOPE)
endfunction()

file(READ ${SOURCE} page)
string(FIND "${page}" "\r" cr)
if(NOT cr EQUAL -1)
  message(FATAL_ERROR "${SOURCE}: CR bytes (the browser hashes the script with LF line ends only)")
endif()
inline_hash("${page}" script script_hash)
inline_hash("${page}" style style_hash)
set(csp "default-src 'none'; script-src ${script_hash}; style-src ${style_hash}; img-src 'self' data: blob:; connect-src 'self'; manifest-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")

file(READ ${SOURCE} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
file(WRITE ${OUT}.tmp "/* generated from tools/qhx/serve/web/index.html by cmake/embed_web.cmake: do not edit */\n"
     "#include <stddef.h>\n"
     "const unsigned char qhx_web_page[] = {\n${hex}0x00};\n"
     "const size_t qhx_web_page_len = sizeof qhx_web_page - 1;\n"
     "const char qhx_web_csp[] = \"${csp}\";\n")
file(RENAME ${OUT}.tmp ${OUT})
