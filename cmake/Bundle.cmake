# The bundle for the GPU machine (DESIGN.md section 6; scripts/gpu-bundle.sh): the
# compiler is linked once, into libtileRT.so, and the code generator with the static
# LLVM NVPTX backend into libtileCG.so next to it, which the runtime dlopens only on
# its first compile (a warm start never pays for loading LLVM: docs/RUNTIME.md). The
# programs that run there link only these libraries, so the whole bundle stays far
# under the 64 MiB a device call carries. Sections of unused code are dropped and
# symbols stripped.
foreach(lib tileRT tileCG)
  target_link_options(${lib} PRIVATE -Wl,--gc-sections -Wl,--no-undefined -s)
endforeach()
target_link_libraries(tileRT PRIVATE m)

set(TILE_BUNDLE_PROGRAMS
    tilec:tools/tilec.c
    tile-examples:tests/examples/check_examples.c
    test_gpu_runtime:tests/gpu/test_gpu_runtime.c
    test_tune_gpu:tests/gpu/test_tune_gpu.c
    launch_overhead:bench/launch_overhead.c
    graph_replay:bench/graph_replay.c)
foreach(entry ${TILE_BUNDLE_PROGRAMS})
  string(REPLACE ":" ";" parts ${entry})
  list(GET parts 0 name)
  list(GET parts 1 src)
  add_executable(${name} ${CMAKE_SOURCE_DIR}/${src})
  target_link_libraries(${name} PRIVATE tileRT m)
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/runtime
                             ${LLVM_INCLUDE_DIR})
  set_target_properties(${name} PROPERTIES BUILD_RPATH "$ORIGIN/runtime" LINK_OPTIONS "-s")
endforeach()
# tilec calls the code generator itself (--emit=ptx, llvm, cubin); the others reach it
# only through the runtime's loader.
target_link_libraries(tilec PRIVATE tileCG)
target_compile_definitions(tilec PRIVATE TILE_HAVE_CODEGEN=1)
target_sources(tilec PRIVATE ${CMAKE_SOURCE_DIR}/tools/cli.c)   # the option parser and atomic outputs
# tilec tune (docs/TUNING.md): its manifest is read with cJSON, whose library is copied
# beside libtileRT so that the bundle runs where libcjson1 is not installed.
find_package(PkgConfig REQUIRED)
pkg_check_modules(CJSON REQUIRED libcjson)
target_sources(tilec PRIVATE ${CMAKE_SOURCE_DIR}/tools/tilec_tune.c ${CMAKE_SOURCE_DIR}/tools/tune_manifest.c
               ${CMAKE_SOURCE_DIR}/tools/tune_report.c ${CMAKE_SOURCE_DIR}/tools/tilec_graph.c)
target_include_directories(tilec PRIVATE ${CMAKE_SOURCE_DIR} ${CJSON_INCLUDE_DIRS})
find_library(CJSON_LIB NAMES cjson HINTS ${CJSON_LIBRARY_DIRS})
get_filename_component(CJSON_REAL ${CJSON_LIB} REALPATH)
# by name, not path: the copy beside libtileRT would otherwise make CMake warn that it
# may hide the system's in tilec's build rpath (it is the same library)
target_link_libraries(tilec PRIVATE -lcjson)
add_custom_command(TARGET tilec POST_BUILD COMMAND ${CMAKE_COMMAND} -E copy ${CJSON_REAL}
                   $<TARGET_FILE_DIR:tileRT>/libcjson.so.1)
# The differential tester (docs/DIFFTEST.md), from several sources; like tilec it calls
# the code generator itself (its --cpu mode), so it links libtileCG too.
file(GLOB TILE_DIFFTEST_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/difftest/*.c)
add_executable(tile-difftest ${TILE_DIFFTEST_SRC})
target_link_libraries(tile-difftest PRIVATE tileRT tileCG m)
set_target_properties(tile-difftest PROPERTIES BUILD_RPATH "$ORIGIN/runtime" LINK_OPTIONS "-s")
