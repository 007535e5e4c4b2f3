# isc-broker build. `make` builds bin/isc, bin/iscd and bin/toml-decode;
# `make check` rebuilds everything under AddressSanitizer + UBSan in build/asan
# and runs every test; `make deps` installs the Debian packages that build and run
# isc, `make test-deps` also what the tests use (scripts/install-deps). `make install`
# (PREFIX, DESTDIR), `make man`, `make man-check` and `make deb` (the Debian package, in
# build/release/deb/) are docs/operations.md's.

# `make` alone builds `all`, whatever rules come before it.
.DEFAULT_GOAL := all

PKGS    := libcurl openssl jansson libxml-2.0 libssh2 sqlite3 libpq libarchive libmicrohttpd
CC      ?= cc
SAN     ?= 0
BUILD   ?= build/release

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

CFLAGS_COMMON := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
	-Wno-missing-field-initializers -pthread -I. $(PKG_CFLAGS) -MMD -MP
ifeq ($(SAN),1)
# The sanitizer build is the test build: it also compiles the named crash points in
# (common/crashpoint.h), which a release build never has.
CFLAGS_MODE := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined \
	-DISC_TEST_HOOKS
LDFLAGS_MODE := -fsanitize=address,undefined
else
CFLAGS_MODE := -O2 -g
LDFLAGS_MODE :=
endif
CFLAGS  += $(CFLAGS_COMMON) $(CFLAGS_MODE)
LDLIBS  := $(PKG_LIBS) -pthread -lm

# iscd's messages to systemd (daemon/notify.c): sd_notify from libsystemd when pkg-config
# finds it (Debian libsystemd-dev), else the built-in few lines of the same datagram
# protocol. ISC_NO_SYSTEMD=1 builds the built-in one even with libsystemd there (use
# another BUILD folder: the object is not rebuilt when only this changes).
ifneq ($(ISC_NO_SYSTEMD),1)
SYSTEMD_LIBS := $(shell pkg-config --libs libsystemd 2>/dev/null)
endif
ifneq ($(SYSTEMD_LIBS),)
$(BUILD)/obj/daemon/notify.o: CFLAGS += -DISC_HAVE_LIBSYSTEMD $(shell pkg-config --cflags libsystemd)
endif

# Where `make install` puts things. PREFIX is compiled into the programs (common/datadir.c)
# so an installed iscd finds its catalog and pages with no build tree beside it.
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
DATADIR ?= $(PREFIX)/share/isc
MANDIR  ?= $(PREFIX)/share/man
DOCDIR  ?= $(PREFIX)/share/doc/isc-broker
COMPLETIONDIR ?= $(PREFIX)/share/bash-completion/completions
# systemd reads /usr/local/lib/systemd/system too; Debian (bookworm) wants /lib/systemd/system.
SYSTEMD_UNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d

# Library modules: every .c in these folders goes into libisc.a.
LIB_DIRS := common config store net toml launchfile shapes queue providers providers/aws providers/gcp keys \
	datasets providers/oci launcher artifacts broker onprem credits prices cli/lib api
LIB_SRCS := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
LIB      := $(BUILD)/libisc.a

CLI_SRCS  := $(wildcard cli/*.c)
CLI_OBJS  := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)
DAEMON_SRCS := $(wildcard daemon/*.c)
DAEMON_OBJS := $(DAEMON_SRCS:%.c=$(BUILD)/obj/%.o)
TOOL_SRCS := $(wildcard tools/*.c)
TOOL_BINS := $(TOOL_SRCS:tools/%.c=$(BUILD)/bin/%)

UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
# What several unit tests share (tests/unit/ files not named test_*): linked into each.
UNIT_HELPER_SRCS := $(filter-out $(UNIT_SRCS),$(wildcard tests/unit/*.c))
UNIT_HELPER_OBJS := $(UNIT_HELPER_SRCS:%.c=$(BUILD)/obj/%.o)
BENCH_SRCS := $(wildcard tests/bench/bench_*.c)
BENCH_BINS := $(BENCH_SRCS:tests/bench/%.c=$(BUILD)/bench/%)

# The hollow test nodes (tests/hollow): an SSH server on libssh, for tests and the bench
# only (iscd and isc never link libssh), and a driver that boots them with the launcher.
HOLLOW_BINS := $(BUILD)/tests/hollow-node $(BUILD)/tests/hollow-drive
HOLLOW_OBJS := $(BUILD)/obj/tests/hollow/hollow_node.o $(BUILD)/obj/tests/hollow/hollow_runtime.o \
               $(BUILD)/obj/common/clock.o

PROGS := $(BUILD)/bin/isc $(BUILD)/bin/iscd $(TOOL_BINS)

# The build's identity (common/version.c): VERSION, and the commit from git, or
# from COMMIT in a tarball made by `git archive` (export-subst fills it in).
ISC_VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)
ISC_COMMIT  := $(shell scripts/build-commit)

# The data folder compiled in (common/datadir.c): rebuilt only when DATADIR changed, as
# version.o is for the commit below.
$(BUILD)/obj/common/datadir.o: CFLAGS += -DISC_DATADIR='"$(DATADIR)"'
$(BUILD)/obj/common/datadir.o: $(BUILD)/datadir.stamp
ifneq ($(file < $(BUILD)/datadir.stamp),$(DATADIR))
$(shell mkdir -p $(BUILD) && echo '$(DATADIR)' > $(BUILD)/datadir.stamp)
endif

# The Control Plane pages (docs/control-plane.md): iscd serves them from BIN/../share/isc/web,
# else DATADIR/web.
WEB_SRCS := $(wildcard web/*.html web/*.css web/*.js web/*.svg)
WEB_OUT  := $(WEB_SRCS:web/%=$(BUILD)/share/isc/web/%)

.PHONY: all programs units benches check deps demo-deps test-deps install demo bench fuzz format format-check clean toml-test man man-check deb

all: programs
ifeq ($(BUILD),build/release)
	@mkdir -p bin
	@for p in $(PROGS); do ln -sf ../$$p bin/$$(basename $$p); done
endif

programs: $(PROGS) $(WEB_OUT)

# The man pages (docs/operations.md, "Man pages"): made by pandoc from the docs themselves,
# so a page and its doc never disagree. isc-config(5) is docs/config.md and isc-launch(5)
# docs/launch-files.md, each after a NAME section from docs/man/NAME.head; isc(1) and
# iscd(8) are docs/man/isc.1.md and iscd.8.md, which `make man-check` holds to the
# programs' own --help (every command and option named).
MAN_PAGES := $(BUILD)/man/isc.1 $(BUILD)/man/iscd.8 $(BUILD)/man/isc-config.5 $(BUILD)/man/isc-launch.5
MAN_DATE  := $(shell git log -1 --format=%cs 2>/dev/null || date -u +%F)
PANDOC_MAN = pandoc -s -f markdown-smart -t man -M date=$(MAN_DATE) -M footer='isc-broker $(ISC_VERSION)' \
	-M header='isc-broker manual'
man: $(MAN_PAGES)
$(BUILD)/man/isc.1: docs/man/isc.1.md
	@mkdir -p $(dir $@)
	$(PANDOC_MAN) -M title=ISC -M section=1 $< -o $@
$(BUILD)/man/iscd.8: docs/man/iscd.8.md
	@mkdir -p $(dir $@)
	$(PANDOC_MAN) -M title=ISCD -M section=8 $< -o $@
# A doc page's own "# Title" line gives way to NAME; its "##" sections become the page's.
$(BUILD)/man/isc-config.5: docs/man/isc-config.5.head docs/config.md
	@mkdir -p $(dir $@)
	{ cat $<; sed '1{/^# /d}' docs/config.md; } | $(PANDOC_MAN) --shift-heading-level-by=-1 \
	    -M title=ISC-CONFIG -M section=5 -o $@
$(BUILD)/man/isc-launch.5: docs/man/isc-launch.5.head docs/launch-files.md
	@mkdir -p $(dir $@)
	{ cat $<; sed '1{/^# /d}' docs/launch-files.md; } | $(PANDOC_MAN) --shift-heading-level-by=-1 \
	    -M title=ISC-LAUNCH -M section=5 -o $@
man-check: programs
	scripts/man-check $(BUILD)/bin

# The systemd units (dist/systemd/), with the paths of this install filled in.
UNITS := $(BUILD)/dist/iscd.service
$(BUILD)/dist/%: dist/systemd/%.in $(BUILD)/datadir.stamp
	@mkdir -p $(dir $@)
	sed -e 's|@BINDIR@|$(BINDIR)|g' $< > $@

# isc and iscd on PATH (README, "Using it"), the catalog and the pages in DATADIR (and
# compiled in), the man pages, bash completion, the docs, the unit and its user.
install: programs man $(UNITS)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(DATADIR)/web $(DESTDIR)$(DATADIR)/shapes \
	    $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 \
	    $(DESTDIR)$(COMPLETIONDIR) $(DESTDIR)$(DOCDIR) $(DESTDIR)$(SYSTEMD_UNITDIR) \
	    $(DESTDIR)$(SYSUSERSDIR)
	install -m 755 $(BUILD)/bin/isc $(BUILD)/bin/iscd $(DESTDIR)$(BINDIR)/
	install -m 644 $(WEB_OUT) $(DESTDIR)$(DATADIR)/web/
	install -m 644 shapes/aws.csv shapes/gcp.csv shapes/oci.csv shapes/README.md $(DESTDIR)$(DATADIR)/shapes/
	install -m 644 $(BUILD)/man/isc.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 644 $(BUILD)/man/isc-config.5 $(BUILD)/man/isc-launch.5 $(DESTDIR)$(MANDIR)/man5/
	install -m 644 $(BUILD)/man/iscd.8 $(DESTDIR)$(MANDIR)/man8/
	install -m 644 dist/bash-completion/isc $(DESTDIR)$(COMPLETIONDIR)/isc
	install -m 644 README.md $(DESTDIR)$(DOCDIR)/
	install -d $(DESTDIR)$(DOCDIR)/docs
	install -m 644 docs/*.md $(DESTDIR)$(DOCDIR)/docs/
	install -m 644 $(UNITS) $(DESTDIR)$(SYSTEMD_UNITDIR)/
	install -m 644 dist/sysusers/isc-broker.conf $(DESTDIR)$(SYSUSERSDIR)/

# The Debian package (debian/, docs/operations.md): dpkg-buildpackage writes the .deb into
# the folder above the source tree, so it runs on a copy of the tree in $(BUILD)/deb/src
# (git ls-files: no build output, no node_modules) and the .deb lands in $(BUILD)/deb/.
deb:
	rm -rf $(BUILD)/deb && mkdir -p $(BUILD)/deb/src
	git ls-files -z | xargs -0 cp --parents -t $(BUILD)/deb/src
	printf '%s\n' '$(ISC_COMMIT)' > $(BUILD)/deb/src/COMMIT
	cd $(BUILD)/deb/src && DEB_BUILD_OPTIONS="parallel=2 nocheck $(DEB_BUILD_OPTIONS)" \
	    dpkg-buildpackage -us -uc -b
	@ls $(BUILD)/deb/*.deb
units: $(UNIT_BINS) $(HOLLOW_BINS)
benches: $(BENCH_BINS) $(HOLLOW_BINS)

$(BUILD)/share/isc/web/%: web/%
	@mkdir -p $(dir $@)
	cp $< $@

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# Only version.o sees the commit, and only when it changed is it rebuilt: the stamp is
# rewritten (when make reads this file) only when its text changed, and has no rule of
# its own, so an unchanged tree has nothing to remake (`make -q` says so).
$(BUILD)/obj/common/version.o: CFLAGS += -DISC_VERSION='"$(ISC_VERSION)"' -DISC_COMMIT='"$(ISC_COMMIT)"'
$(BUILD)/obj/common/version.o: $(BUILD)/version.stamp
VERSION_STAMP_TEXT := $(ISC_VERSION) $(ISC_COMMIT)
ifneq ($(file < $(BUILD)/version.stamp),$(VERSION_STAMP_TEXT))
$(shell mkdir -p $(BUILD) && echo '$(VERSION_STAMP_TEXT)' > $(BUILD)/version.stamp)
endif

# Objects made on the way to a program (tools/, tests/) are kept: make would otherwise
# delete them as intermediate files and rebuild toml-decode and credits-race next time.
.SECONDARY:

$(LIB): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/bin/isc: $(CLI_OBJS) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_MODE) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bin/iscd: $(DAEMON_OBJS) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_MODE) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(SYSTEMD_LIBS)

$(BUILD)/bin/%: $(BUILD)/obj/tools/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_MODE) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(UNIT_HELPER_OBJS) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_MODE) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcmocka

$(BUILD)/bench/%: $(BUILD)/obj/tests/bench/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_MODE) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(HOLLOW_OBJS): CFLAGS += $(shell pkg-config --cflags libssh 2>/dev/null)

$(BUILD)/tests/hollow-node: $(HOLLOW_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_MODE) $(LDFLAGS) -o $@ $^ $(shell pkg-config --libs libssh 2>/dev/null) -pthread

$(BUILD)/tests/hollow-drive: $(BUILD)/obj/tests/hollow/hollow_drive.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_MODE) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The test suite runs on the sanitizer build.
check: test-deps format-check
	$(MAKE) --no-print-directory SAN=1 BUILD=build/asan programs units
	ISC_BIN=$(CURDIR)/build/asan/bin ISC_TESTS=$(CURDIR)/build/asan/tests tests/run-all

toml-test: programs
	tests/toml-test/run $(BUILD)/bin/toml-decode

bench: demo-deps
	$(MAKE) --no-print-directory all benches
	tests/bench/run

demo: demo-deps
	$(MAKE) --no-print-directory all
	tests/demo

fuzz: demo-deps
	tests/fuzz/run

# What building and running need (Debian packages); the demo, benchmarks and fuzzing also
# need the test packages (sshd nodes, Python mocks, clang); the checks also the official
# npm clients of the mock-fidelity suites (about 137 MB from the npm registry).
deps:
	@scripts/install-deps
demo-deps:
	@scripts/install-deps --tests
test-deps:
	@scripts/install-deps --tests --npm

FORMAT_SRCS = $(shell git ls-files '*.c' '*.h')
format:
	clang-format -i $(FORMAT_SRCS)
format-check:
	clang-format --dry-run --Werror $(FORMAT_SRCS)

clean:
	rm -rf build bin

# Files only: make install puts a sysusers.d folder under build/ (make deb's copy).
-include $(shell find build -name '*.d' -type f 2>/dev/null)
