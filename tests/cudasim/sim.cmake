# tests/cudasim/sim.cmake - the CPU simulator of the CUDA runtime / cuBLAS
# subset (see README.md here).  include() it from a CMakeLists whose project
# enables CXX; it defines:
#   mhla_cudasim_runtime  static library; link it into anything built from
#                         .cu sources compiled as C++ with -DMHLA_CUDA_SIM
#   test_cudasim          the simulator's self-test, registered as cuda.sim_selftest
#                         (mhla_add_test: cmake/MhlaTest.cmake)
set(MHLA_CUDASIM_DIR ${CMAKE_CURRENT_LIST_DIR})
find_package(Threads REQUIRED)

add_library(mhla_cudasim_runtime STATIC ${MHLA_CUDASIM_DIR}/cudasim.cpp)
set_target_properties(mhla_cudasim_runtime PROPERTIES
  CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF POSITION_INDEPENDENT_CODE ON)
target_compile_features(mhla_cudasim_runtime PUBLIC cxx_std_17)
target_compile_options(mhla_cudasim_runtime PRIVATE -Wall -Wextra -Werror)
target_include_directories(mhla_cudasim_runtime PUBLIC ${MHLA_CUDASIM_DIR})
target_link_libraries(mhla_cudasim_runtime PUBLIC Threads::Threads)

add_executable(test_cudasim ${MHLA_CUDASIM_DIR}/test_cudasim.cpp)
set_target_properties(test_cudasim PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
target_compile_options(test_cudasim PRIVATE -Wall -Wextra -Werror)
target_link_libraries(test_cudasim PRIVATE mhla_cudasim_runtime)
mhla_add_test(NAME cuda.sim_selftest QUICK COMMAND test_cudasim)
