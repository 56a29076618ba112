# Writes the C source of an ELF filter library (run at build time with cmake -P).
#
#   cmake -DNM=<nm> -DFILTEE_FILE=<path of the built filtee> -DFILTEE=<its soname>
#         -DFILTER=<soname of the filter> -DPATTERN=<regex of the symbols>
#         -DOUTPUT=<.c file> -P mock_filter_source.cmake
#
# A filter (ld --filter=FILTEE, the DT_FILTER tag) carries a symbol table for the link
# editor, while the dynamic loader resolves every one of its symbols in FILTEE: a program
# linked against the filter calls FILTEE's functions, and a process that loads both
# libraries has one copy of the code and state (glibc honours DT_FILTER for symbol
# lookups and dlsym alike). The symbols are the dynamic symbols of the built FILTEE that
# match PATTERN, so the filter follows FILTEE's exports without a hand-kept list. Their
# bodies here only run under a loader that ignores DT_FILTER: they say so and abort.
foreach(var NM FILTEE_FILE FILTEE FILTER PATTERN OUTPUT)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "mock_filter_source.cmake: -D${var}=... is required")
  endif()
endforeach()

execute_process(COMMAND "${NM}" -D --defined-only "${FILTEE_FILE}"
  OUTPUT_VARIABLE nm_out RESULT_VARIABLE nm_rc ERROR_VARIABLE nm_err)
if(NOT nm_rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D ${FILTEE_FILE} failed: ${nm_err}")
endif()

set(names "")
string(REPLACE "\n" ";" lines "${nm_out}")
foreach(line IN LISTS lines)
  # "<address> <type> <name>[@version]"; functions are T (text) or i (indirect)
  if(line MATCHES "^[0-9a-fA-F]+ [TtWi] ([A-Za-z_][A-Za-z0-9_]*)")
    set(name "${CMAKE_MATCH_1}")
    if(name MATCHES "${PATTERN}")
      list(APPEND names "${name}")
    endif()
  endif()
endforeach()
list(REMOVE_DUPLICATES names)
list(SORT names)
list(LENGTH names count)
if(count EQUAL 0)
  message(FATAL_ERROR "no symbol of ${FILTEE_FILE} matches '${PATTERN}'")
endif()

set(text "/*\n * ${FILTER}: an ELF filter of ${FILTEE} (${count} symbols).\n *\n")
string(APPEND text " * Generated at build time by cmake/mock_filter_source.cmake from the dynamic symbols\n")
string(APPEND text " * of ${FILTEE}. Do not edit. The dynamic loader resolves every symbol below in\n")
string(APPEND text " * ${FILTEE} (DT_FILTER); these bodies run only under a loader that ignores filters.\n */\n")
string(APPEND text "#include <stdlib.h>\n#include <unistd.h>\n\n")
string(APPEND text "static void filter_not_resolved(void)\n{\n")
string(APPEND text "    static const char msg[] = \"${FILTER}: this dynamic loader ignored DT_FILTER; \"\n")
string(APPEND text "                              \"link or load ${FILTEE}, which implements these functions\\n\";\n")
string(APPEND text "    if (write(2, msg, sizeof msg - 1) < 0) {\n        abort();\n    }\n    abort();\n}\n\n")
string(APPEND text "#define FILTERED(name) \\\n")
string(APPEND text "    extern void name(void) __attribute__((visibility(\"default\"), alias(\"filter_not_resolved\")));\n\n")
foreach(name IN LISTS names)
  string(APPEND text "FILTERED(${name})\n")
endforeach()

file(WRITE "${OUTPUT}" "${text}")
