# help2man.cmake: one man page from a program's --help, at build time (CMakeLists.txt
# "Install"). Run as
#   cmake -DHELP2MAN=PATH -DPROG=BINARY -DNAME=balplan -DVERSION=0.1.0 -DSUMMARY=TEXT
#         -DOUT=FILE.1 [-DSUBCOMMANDS=ON] -P help2man.cmake
# SUBCOMMANDS: the program lists commands under "commands:" in its --help (balplan does,
# cmd/balplan.c), and the page gets a COMMANDS section with every command's own --help,
# verbatim. The version is given (balprof has no --version). If help2man fails (a program
# that cannot run on the build machine) the page says only to run --help, with a warning:
# the build goes on and the install stays whole.
foreach(v HELP2MAN PROG NAME VERSION SUMMARY OUT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "help2man.cmake: -D${v}= is required")
  endif()
endforeach()

# Text as roff that prints it as it is: backslashes and hyphens escaped, a line that starts
# with a control character guarded.
function(bp_roff_verbatim text out)
  string(REPLACE "\\" "\\e" text "${text}")
  string(REPLACE "-" "\\-" text "${text}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

set(include_args "")
if(SUBCOMMANDS)
  execute_process(COMMAND ${PROG} --help OUTPUT_VARIABLE top RESULT_VARIABLE rc)
  set(section "[COMMANDS]\n")
  if(rc EQUAL 0)
    string(REPLACE ";" "," top "${top}") # a summary's ';' is no list separator here
    # The lines "  NAME  summary" after "commands:", up to the first blank line.
    string(REGEX MATCH "commands:\n(( +[a-z][a-z0-9-]* +[^\n]*\n)+)" block "${top}")
    string(REGEX MATCHALL " +[a-z][a-z0-9-]* +[^\n]*\n" lines "${CMAKE_MATCH_1}")
    foreach(line IN LISTS lines)
      string(REGEX MATCH "^ +([a-z][a-z0-9-]*)" _ "${line}")
      set(cmd "${CMAKE_MATCH_1}")
      execute_process(COMMAND ${PROG} ${cmd} --help OUTPUT_VARIABLE help RESULT_VARIABLE crc)
      if(NOT crc EQUAL 0)
        message(WARNING "help2man.cmake: '${NAME} ${cmd} --help' exited ${crc}")
        continue()
      endif()
      bp_roff_verbatim("${help}" help)
      string(APPEND section ".SS \"${NAME} ${cmd}\"\n.nf\n${help}.fi\n")
    endforeach()
  endif()
  set(inc "${OUT}.h2m")
  file(WRITE "${inc}" "${section}")
  set(include_args "--include=${inc}")
endif()

execute_process(
  COMMAND ${HELP2MAN} --no-info --version-string=${VERSION} --name=${SUMMARY}
          ${include_args} --output=${OUT}.tmp ${PROG}
  RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc EQUAL 0)
  file(RENAME "${OUT}.tmp" "${OUT}")
else()
  message(WARNING "help2man.cmake: help2man failed for ${NAME} (${rc}): ${err}; "
                  "${OUT} says only to run '${NAME} --help'")
  file(REMOVE "${OUT}.tmp")
  string(TOUPPER "${NAME}" upper)
  file(WRITE "${OUT}" ".TH ${upper} 1 \"\" \"${NAME} ${VERSION}\" \"User Commands\"\n"
                      ".SH NAME\n${NAME} \\- ${SUMMARY}\n"
                      ".SH DESCRIPTION\nRun\n.B ${NAME} \\-\\-help\nfor the options.\n")
endif()
