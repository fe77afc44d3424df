# cmake -DINPUT=<file> -DOUTPUT=<.cpp> -DSYMBOL=<name> -DHEADER=<include> -P embed_file.cmake
# Writes OUTPUT defining `const unsigned char SYMBOL[]` (the bytes of INPUT plus a NUL)
# and `const std::size_t SYMBOLSize` (without the NUL), in namespace attntune::report_assets.
# Bytes as hex, so that no character of INPUT needs escaping in C++.
file(READ "${INPUT}" _hex HEX)
string(LENGTH "${_hex}" _hex_len)
math(EXPR _size "${_hex_len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," _bytes "${_hex}")
# 0x.., is 5 characters a byte: break the lines every 24 bytes (120 characters). CMake
# regexes have no {n} repetition, hence the pattern built by hand.
string(REPEAT "0x..," 24 _line)
string(REGEX REPLACE "(${_line})" "\\1\n" _bytes "${_bytes}")
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT} by reports/embed_file.cmake; do not edit.\n"
  "#include \"${HEADER}\"\n\n"
  "namespace attntune {\nnamespace report_assets {\n\n"
  "const unsigned char ${SYMBOL}[] = {\n${_bytes}0x00};\n"
  "const std::size_t ${SYMBOL}Size = ${_size};\n\n"
  "}  // namespace report_assets\n}  // namespace attntune\n")
# configure_file writes only on change, so that an unchanged file does not recompile.
configure_file("${OUTPUT}.tmp" "${OUTPUT}" COPYONLY)
file(REMOVE "${OUTPUT}.tmp")
