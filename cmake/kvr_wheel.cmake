# SPDX-License-Identifier: MIT
# Builds the kvring wheel with the built libkvring.so inside the package:
#   cmake -DSRC=<worker/python> -DLIB=<libkvring.so.X.Y.Z> -DSONAME=libkvring.so.X
#         -DVERSION=X.Y.Z -DPY=<python3> -DSTAGE=<dir> -DOUT=<dir> -P kvr_wheel.cmake
# The `wheel` target runs it (worker/CMakeLists.txt) and so does the
# python_wheel test (tests/install/test_wheel.sh), which then installs the
# result into fresh venvs. Offline: the system's setuptools and wheel build
# it (pip --no-build-isolation --no-index), nothing is downloaded.
foreach(_v SRC LIB SONAME VERSION PY STAGE OUT)
	if(NOT DEFINED ${_v})
		message(FATAL_ERROR "kvr_wheel.cmake: -D${_v}= is missing")
	endif()
endforeach()

# The package's version must be the library's: kvring.__version__ is what
# pyproject.toml reads, kvr_version() what the loaded library answers.
file(STRINGS ${SRC}/kvring/__init__.py _line REGEX "^__version__ = ")
string(REGEX REPLACE "^__version__ = \"([^\"]*)\".*" "\\1" _pyver "${_line}")
if(NOT _pyver STREQUAL VERSION)
	message(FATAL_ERROR "kvr_wheel.cmake: kvring.__version__ is '${_pyver}' in ${SRC}/kvring/__init__.py but the library is ${VERSION}: make them agree")
endif()

# A fresh stage each time: the package as in the source tree, without the
# cmake --install record (_install.py) and caches, plus the library under
# its SONAME, which kvring/_lib.py loads first when it lies beside it.
file(REMOVE_RECURSE ${STAGE})
file(MAKE_DIRECTORY ${STAGE})
file(COPY ${SRC}/pyproject.toml ${SRC}/setup.py ${SRC}/README.md
	DESTINATION ${STAGE})
file(COPY ${SRC}/kvring DESTINATION ${STAGE}
	PATTERN __pycache__ EXCLUDE PATTERN _install.py EXCLUDE
	PATTERN "libkvring.so*" EXCLUDE)
file(COPY_FILE ${LIB} ${STAGE}/kvring/${SONAME})

file(MAKE_DIRECTORY ${OUT})
file(GLOB _old ${OUT}/kvring-*.whl)
if(_old)
	file(REMOVE ${_old})
endif()
execute_process(COMMAND ${PY} -m pip wheel --no-build-isolation --no-deps
		--no-index --no-cache-dir --disable-pip-version-check --quiet
		-w ${OUT} ${STAGE}
	RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
if(NOT _rc EQUAL 0)
	message(FATAL_ERROR "kvr_wheel.cmake: '${PY} -m pip wheel' failed (needs python3-pip, python3-setuptools and python3-wheel: scripts/setup.sh deps):\n${_out}")
endif()
file(GLOB _whl ${OUT}/kvring-${VERSION}-py3-none-*.whl)
if(NOT _whl)
	message(FATAL_ERROR "kvr_wheel.cmake: pip wrote no kvring-${VERSION}-py3-none-*.whl in ${OUT}:\n${_out}")
endif()
message(STATUS "kvring wheel: ${_whl}")
