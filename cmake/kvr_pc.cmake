# SPDX-License-Identifier: MIT
# kvr_write_pc(LIBDIR INCLUDEDIR PREFIX OUT): kvring.pc from
# worker/kvring.pc.in. The file is relocatable: its prefix is found from
# where it is installed (${pcfiledir}), as many directories up as
# LIBDIR/pkgconfig is deep, so lib/pkgconfig gives ../.. and Debian's
# multiarch lib/x86_64-linux-gnu/pkgconfig (the libdir for prefix /usr)
# ../../..; an absolute LIBDIR or INCLUDEDIR is written as it is.
# Included by worker/CMakeLists.txt; run with -P (-DLIBDIR= -DINCLUDEDIR=
# -DVERSION= -DOUT=) by tests/install/test_install.sh for a libdir the
# build tree does not use.
function(kvr_write_pc libdir includedir version out)
	if(IS_ABSOLUTE "${libdir}")
		set(KVR_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
		set(KVR_PC_LIBDIR "${libdir}")
	else()
		file(RELATIVE_PATH _up "/p/${libdir}/pkgconfig" "/p")
		string(REGEX REPLACE "/$" "" _up "${_up}")
		set(KVR_PC_PREFIX "\${pcfiledir}/${_up}")
		set(KVR_PC_LIBDIR "\${prefix}/${libdir}")
	endif()
	if(IS_ABSOLUTE "${includedir}")
		set(KVR_PC_INCLUDEDIR "${includedir}")
	else()
		set(KVR_PC_INCLUDEDIR "\${prefix}/${includedir}")
	endif()
	set(PROJECT_VERSION "${version}")
	configure_file("${CMAKE_CURRENT_FUNCTION_LIST_DIR}/../worker/kvring.pc.in"
		"${out}" @ONLY)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE AND DEFINED OUT)
	kvr_write_pc("${LIBDIR}" "${INCLUDEDIR}" "${VERSION}" "${OUT}")
endif()
