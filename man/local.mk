# SPDX-License-Identifier: BSD-3-Clause
# man: the manual, written in scdoc (man/<page>.<section>.scd) and made
# into man pages at build time with scdoc.  The pages are in the tarball,
# so a release builds and installs them without scdoc.
#
# Section 3 has one page per API family; its NAME line lists every
# function the page describes, and `make install` adds a one-line ".so"
# page for each of them (man/so-links.sh), so that `man rig_job_open`
# finds rig_job(3).  `make check` runs man/check-pages.sh, which fails when
# a function the installed headers declare has no page.
#
# To add a page: write man/<name>.<section>.scd (the pages here show the
# form) and list man/<name>.<section> below.  To document a new function:
# add its name to the NAME line of its family's page and an entry that
# starts with *<name>*( in that page.
RIG_MAN1 = man/rig_info.1 man/mesh_run.1 man/rig_agent.1 man/rig_osu.1 \
	man/rig-cuda-worker.1
RIG_MAN3 = man/rig_rail.3 man/rig_transfer.3 man/rig_count.3 \
	man/rig_job.3 man/rig_provider.3 man/rig_proxy.3 man/rig_settings.3 \
	man/rig_remote.3 man/rig_wait.3 man/mesh_backend.3 \
	man/mesh_executors.3 man/mesh_driver.3 man/mesh_payload.3 \
	man/mesh_worker.3 man/mesh_cuda.3 man/mesh_end.3 man/mesh_ends.3 \
	man/rig_remote_end.3
RIG_MAN7 = man/rig.7
dist_man_MANS = $(RIG_MAN1) $(RIG_MAN3) $(RIG_MAN7)
RIG_MANPAGE_SRC = $(dist_man_MANS:=.scd)
EXTRA_DIST += $(RIG_MANPAGE_SRC) man/pages.stamp man/so-links.sh \
	man/check-pages.sh
MAINTAINERCLEANFILES = $(dist_man_MANS) man/pages.stamp

# One stamp for all pages (a rule with many targets would run once per
# target under make -j).
man/pages.stamp: $(RIG_MANPAGE_SRC)
	@if test -z "$(SCDOC)"; then \
	  echo "man: scdoc makes the pages from man/*.scd (Debian: scdoc);" \
	    "a release tarball carries them made"; exit 1; fi
	@$(MKDIR_P) man
	$(AM_V_GEN)set -e; for s in $(RIG_MANPAGE_SRC); do \
	  p=`echo $$s | sed 's/\.scd$$//'`; \
	  $(SCDOC) < `test -f $$s || echo $(srcdir)/`$$s > $$p.tmp; \
	  mv $$p.tmp $$p; \
	done; touch $@
$(dist_man_MANS): man/pages.stamp

install-data-local: install-man-links
uninstall-local: uninstall-man-links
install-man-links:
	$(SHELL) $(srcdir)/man/so-links.sh install '$(DESTDIR)$(mandir)' \
	  $(srcdir) $(RIG_MANPAGE_SRC)
uninstall-man-links:
	$(SHELL) $(srcdir)/man/so-links.sh uninstall '$(DESTDIR)$(mandir)' \
	  $(srcdir) $(RIG_MANPAGE_SRC)

TESTS += man/check-pages.sh
