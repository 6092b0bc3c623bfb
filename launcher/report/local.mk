# launcher/report/local.mk: stork report, a run directory read back as an
# HTML page or text.
launcher_stork_SOURCES += \
	launcher/report/report.c launcher/report/report.h \
	launcher/report/report_data.c launcher/report/report_html.c
