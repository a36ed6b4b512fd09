# One warnings target every dionsim target links privately; no global flags.
add_library(dionsim_warnings INTERFACE)
target_compile_options(dionsim_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align -Woverloaded-virtual -Wconversion -Wno-sign-conversion>)
