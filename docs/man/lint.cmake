# SPDX-License-Identifier: MIT
# ctest man_pages: every page through groff -man -ww -z, which must print
# nothing (a warning is a failure), and every page must exist.
foreach(page ${PAGES})
	if(NOT EXISTS ${DIR}/${page})
		message(FATAL_ERROR "missing manual page ${DIR}/${page}")
	endif()
	execute_process(COMMAND ${GROFF} -man -ww -z ${DIR}/${page}
		OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
	if(NOT rc EQUAL 0 OR NOT "${out}${err}" STREQUAL "")
		message(FATAL_ERROR "groff -man -ww -z ${page}: rc ${rc}\n${out}${err}")
	endif()
	message(STATUS "${page}: clean")
endforeach()
