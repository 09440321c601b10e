# Writes the file IN as a NUL-terminated C char array named NAME into OUT
# (run with cmake -P at build time, so the report's assets stay plain files).
file(READ ${IN} bytes HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${bytes}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE ${OUT} "/* Generated from ${IN} by embed.cmake; do not edit. */\nconst char ${NAME}[] = {\n${bytes}0x00};\n")
