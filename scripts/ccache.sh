# Sourced by the build scripts: compiles through ccache, with one cache per checkout
# (<root>/.cache/ccache unless CCACHE_DIR is set), so the Debian packages' build and the
# previous release's build reuse every object the test build already compiled with the same
# flags. Paths are hashed relative to each build directory, which is why those builds keep
# their build directory one level below their source tree, as build/ is.
# Sets `launcher` (CMake arguments; empty without ccache) and `build_flags`, the build type
# and flags of every build that shares objects: Debian's -O2, with line tables only (full
# debug information makes each compile about a third longer; the packages strip it anyway,
# and line tables keep file:line in backtraces and sanitizer reports).
build_flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG")
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_DIR=${CCACHE_DIR:-$root/.cache/ccache}
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
  export CCACHE_NOHASHDIR=true  # debug info names the build directory; objects stay shareable
  export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-8G}
  # The test tiers compile with a precompiled header; ccache caches them only with these.
  export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros}
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
