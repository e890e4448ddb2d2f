# PW_SANITIZE=address builds everything with ASan+UBSan; PW_SANITIZE=thread with TSan.
# PW_SANITIZER_FLAGS holds the flags, for builds outside this tree that link our libraries.
set(PW_SANITIZER_FLAGS "")
if(PW_SANITIZE STREQUAL "address")
  set(PW_SANITIZER_FLAGS -fsanitize=address,undefined -fno-omit-frame-pointer)
  add_compile_options(${PW_SANITIZER_FLAGS} -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
  add_compile_definitions(PW_POISON_UNINITIALIZED)  # ops/tensor.cc
elseif(PW_SANITIZE STREQUAL "thread")
  set(PW_SANITIZER_FLAGS -fsanitize=thread -fno-omit-frame-pointer)
  add_compile_options(${PW_SANITIZER_FLAGS})
  add_link_options(-fsanitize=thread)
elseif(NOT PW_SANITIZE STREQUAL "")
  message(FATAL_ERROR "PW_SANITIZE must be '', 'address' or 'thread', not '${PW_SANITIZE}'")
endif()
