# Example configuration shipped with the sources and installed for
# administrators: the configuration and sbatch examples as documentation,
# the plugstack.conf.d snippet where Debian's plugstack.conf includes it.
examplesdir = $(docdir)/examples
dist_examples_DATA = etc/stork.yaml etc/stork.sbatch etc/program.sbatch

# The installed snippet names the plugin where this build installs it
# (the example assumes the default prefix); its plugin lines stay commented
# out, so that installing the plugin enables nothing until an administrator
# says so. The rule fails if the example stops matching either promise.
plugstackdir = $(sysconfdir)/slurm/plugstack.conf.d
EXTRA_DIST += etc/plugstack.conf.d/stork.conf
CLEANFILES += etc/stork-plugstack.conf
all-local: etc/stork-plugstack.conf
etc/stork-plugstack.conf: etc/plugstack.conf.d/stork.conf Makefile
	$(AM_V_GEN)$(MKDIR_P) $(@D) && \
	sed -e 's|/usr/local/lib/stork/spank_stork\.so|$(spank_plugindir)/spank_stork.so|g' \
		$(srcdir)/etc/plugstack.conf.d/stork.conf >$@.tmp && \
	if grep -q '^[^#]' $@.tmp || ! grep -qF '#optional $(spank_plugindir)/spank_stork.so' $@.tmp; then \
		echo "$@: expected only comments, one of them '#optional $(spank_plugindir)/spank_stork.so'" >&2; \
		rm -f $@.tmp; exit 1; \
	fi && mv -f $@.tmp $@
install-data-local: etc/stork-plugstack.conf
	$(MKDIR_P) $(DESTDIR)$(plugstackdir)
	$(INSTALL_DATA) etc/stork-plugstack.conf $(DESTDIR)$(plugstackdir)/stork.conf
uninstall-local:
	rm -f $(DESTDIR)$(plugstackdir)/stork.conf
