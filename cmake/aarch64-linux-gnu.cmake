# Cross build for aarch64 Linux with Debian's gcc-aarch64-linux-gnu (scripts/deps.sh installs it,
# with libc6-dev-arm64-cross and qemu-user). ctest runs the test binaries through qemu-aarch64,
# which finds the arm64 C library and loader under /usr/aarch64-linux-gnu.
#   cmake -S . -B build-arm -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DQHX_KERNELS_ONLY=ON
# (make test-arm). Only QHX_KERNELS_ONLY builds: there are no arm64 jansson/PCRE2/... packages here.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(QHX_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${QHX_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${QHX_CROSS_TRIPLE}-g++)

# Headers and libraries from the cross prefix only; programs (cmake's helpers) from the host.
set(CMAKE_FIND_ROOT_PATH /usr/${QHX_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# An ARMv8.0 core (Cortex-A53: Advanced SIMD, no dot product, no fp16 arithmetic), so a kernel
# that used anything beyond the baseline the NEON code promises would die with SIGILL here.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -cpu cortex-a53 -L /usr/${QHX_CROSS_TRIPLE})
