# The layering of pipeweave's libraries, checked from their #include lines:
#   cmake -DPW_SOURCE_DIR=<tree> -P cmake/CheckLayering.cmake
# Each folder may include itself and the folders listed for it, nothing above it. The data
# flows module (ir/) -> passes/ -> plan -> prices (cost_model/) -> simulator/ | executor/;
# a pass may consult the prices and the simulators (through PassContext) to choose a
# rewrite, so passes/ sits above them in this table. docs/architecture.md draws it.
# Fails, naming every include that points up or sideways.
cmake_minimum_required(VERSION 3.22)
set(pw_layers proto ir ops cost_model simulator viz passes models executor search ab tools)
set(pw_allowed_proto)
set(pw_allowed_ir proto)
set(pw_allowed_ops ir proto)
set(pw_allowed_cost_model ops ir proto)
set(pw_allowed_simulator cost_model ops ir proto)
set(pw_allowed_viz simulator cost_model ops ir proto)
set(pw_allowed_passes simulator cost_model ops ir proto)
set(pw_allowed_models ops ir proto)
set(pw_allowed_executor ops ir proto)
set(pw_allowed_search passes models simulator cost_model ops ir proto)
set(pw_allowed_ab passes executor viz simulator cost_model ops ir proto)
set(pw_allowed_tools ab search passes models executor viz simulator cost_model ops ir proto)
# Folders no library may include at all.
set(pw_not_libraries tests benchmarks examples)

if(NOT PW_SOURCE_DIR)
  message(FATAL_ERROR "CheckLayering.cmake: pass -DPW_SOURCE_DIR=<source tree>")
endif()
set(known ${pw_layers} ${pw_not_libraries})
set(violations "")
set(checked 0)
foreach(layer ${pw_layers})
  if(NOT IS_DIRECTORY ${PW_SOURCE_DIR}/${layer})
    continue()
  endif()
  file(GLOB_RECURSE sources RELATIVE ${PW_SOURCE_DIR}
    ${PW_SOURCE_DIR}/${layer}/*.h ${PW_SOURCE_DIR}/${layer}/*.cc ${PW_SOURCE_DIR}/${layer}/*.cu
    ${PW_SOURCE_DIR}/${layer}/*.cuh ${PW_SOURCE_DIR}/${layer}/*.inc)
  foreach(source ${sources})
    math(EXPR checked "${checked} + 1")
    file(STRINGS ${PW_SOURCE_DIR}/${source} includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    foreach(line ${includes})
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]*)\".*" "\\1" path "${line}")
      string(REGEX MATCH "^[^/]+" top "${path}")
      if(NOT path MATCHES "/" OR top STREQUAL layer OR NOT top IN_LIST known)
        continue()  # a header beside it, its own folder, or another project's (hwy/...)
      endif()
      if(NOT top IN_LIST pw_allowed_${layer})
        string(REPLACE ";" ", " allowed "${pw_allowed_${layer}}")
        if(allowed STREQUAL "")
          set(allowed "nothing")
        endif()
        string(APPEND violations
          "  ${source} includes \"${path}\": ${layer}/ may include only ${allowed}\n")
      endif()
    endforeach()
  endforeach()
endforeach()
if(checked EQUAL 0)
  message(FATAL_ERROR "CheckLayering.cmake: no sources under ${PW_SOURCE_DIR}")
endif()
if(violations)
  message(FATAL_ERROR "layering: includes that point up (cmake/CheckLayering.cmake has the "
    "table; move the code down or the include out):\n${violations}")
endif()
message(STATUS "layering: ${checked} files, every include points down")
