#!/usr/bin/env bash
# On the device: unpacks .devdeps/icu.tar.xz (scripts/pack_device_deps.sh) and writes
# .devdeps/lib/pkgconfig/icu-uc.pc, which links the carried ICU. Source this file: it exports
# PKG_CONFIG_PATH for the CMake run that follows and LD_LIBRARY_PATH for the programs it builds.
dev=$PWD/.devdeps
if [[ -f $dev/icu.tar.xz && ! -e $dev/lib/libicuuc.so ]]; then
  mkdir -p "$dev/icu" && tar -xJf "$dev/icu.tar.xz" -C "$dev/icu"
  mv "$dev/icu/include/unicode" "$dev/include/" && mv "$dev/icu/"libicu* "$dev/lib/" && rm -rf "$dev/icu"
  mkdir -p "$dev/lib/pkgconfig"
  cat >"$dev/lib/pkgconfig/icu-uc.pc" <<PC
prefix=$dev
Name: icu-uc
Description: ICU common library (carried in .devdeps)
Version: $(cat "$dev/icu-version")
Cflags: -I\${prefix}/include
Libs: -L\${prefix}/lib -licuuc -licudata
PC
fi
if [[ -f $dev/lib/pkgconfig/icu-uc.pc ]]; then
  export PKG_CONFIG_PATH=$dev/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  export LD_LIBRARY_PATH=$dev/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
