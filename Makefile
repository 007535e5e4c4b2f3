# isc-broker build. `make` builds bin/isc, bin/iscd and bin/toml-decode;
# `make check` rebuilds everything under AddressSanitizer + UBSan in build/asan
# and runs every test; `make deps` installs the Debian packages that build and run
# isc, `make test-deps` also what the tests use (scripts/install-deps).

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

# The Control Plane pages (docs/control-plane.md): iscd serves them from BIN/../share/isc/web.
WEB_SRCS := $(wildcard web/*.html web/*.css web/*.js web/*.svg)
WEB_OUT  := $(WEB_SRCS:web/%=$(BUILD)/share/isc/web/%)

.PHONY: all programs units benches check deps demo-deps test-deps install demo bench fuzz format format-check clean toml-test

all: programs
ifeq ($(BUILD),build/release)
	@mkdir -p bin
	@for p in $(PROGS); do ln -sf ../$$p bin/$$(basename $$p); done
endif

programs: $(PROGS) $(WEB_OUT)

# isc and iscd on PATH (README, "Using it"): under PREFIX, with the pages where iscd
# looks for them (its own folder's ../share/isc/web).
PREFIX ?= /usr/local
install: programs
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/isc/web
	install -m 755 $(BUILD)/bin/isc $(BUILD)/bin/iscd $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(WEB_OUT) $(DESTDIR)$(PREFIX)/share/isc/web/
units: $(UNIT_BINS) $(HOLLOW_BINS)
benches: $(BENCH_BINS) $(HOLLOW_BINS)

$(BUILD)/share/isc/web/%: web/%
	@mkdir -p $(dir $@)
	cp $< $@

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

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
	$(CC) $(LDFLAGS_MODE) -o $@ $^ $(LDLIBS)

$(BUILD)/bin/iscd: $(DAEMON_OBJS) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_MODE) -o $@ $^ $(LDLIBS)

$(BUILD)/bin/%: $(BUILD)/obj/tools/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_MODE) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(UNIT_HELPER_OBJS) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_MODE) -o $@ $^ $(LDLIBS) -lcmocka

$(BUILD)/bench/%: $(BUILD)/obj/tests/bench/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_MODE) -o $@ $^ $(LDLIBS)

$(HOLLOW_OBJS): CFLAGS += $(shell pkg-config --cflags libssh 2>/dev/null)

$(BUILD)/tests/hollow-node: $(HOLLOW_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_MODE) -o $@ $^ $(shell pkg-config --libs libssh 2>/dev/null) -pthread

$(BUILD)/tests/hollow-drive: $(BUILD)/obj/tests/hollow/hollow_drive.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_MODE) -o $@ $^ $(LDLIBS)

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

-include $(shell find build -name '*.d' 2>/dev/null)
