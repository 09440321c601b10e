# The HTML report's parts (reports/html_*.c) and its stylesheet, embedded
# into the reports library as a C string at build time.
set(TPAUDIT_HTML_CSS ${CMAKE_CURRENT_SOURCE_DIR}/html/report.css)
set(TPAUDIT_HTML_CSS_C ${CMAKE_CURRENT_BINARY_DIR}/html_stylesheet.c)
add_custom_command(OUTPUT ${TPAUDIT_HTML_CSS_C}
  COMMAND ${CMAKE_COMMAND} -DIN=${TPAUDIT_HTML_CSS} -DOUT=${TPAUDIT_HTML_CSS_C} -DNAME=html_stylesheet
          -P ${CMAKE_CURRENT_SOURCE_DIR}/html/embed.cmake
  DEPENDS ${TPAUDIT_HTML_CSS} ${CMAKE_CURRENT_SOURCE_DIR}/html/embed.cmake
  COMMENT "tpaudit: embedding report.css" VERBATIM)
target_sources(tpaudit_reports PRIVATE html_escape.c html_stack.c html_plot.c html_growth.c html_libraries.c html_ledger.c html_peak.c html_owners.c ${TPAUDIT_HTML_CSS_C})
