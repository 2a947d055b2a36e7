# PartyCast: `make demo` plays a sample, `make test` runs every test. Both install what they need.
SHELL := /bin/bash
FIXTURES := Fixtures/generated
# What the build compiles against; then the tests' peers and the demo's tools.
BUILD_PACKAGES := pkg-config libmpg123-dev libopus-dev libasound2-dev libavahi-client-dev libspeexdsp-dev \
	libfaad-dev libflac-dev libvorbis-dev libopusfile-dev libsodium-dev libssl-dev libqrencode-dev libcurl4-openssl-dev libmpdclient-dev
PEER_PACKAGES := faad flac vorbis-tools ffmpeg \
	libasound2-plugins pulseaudio pulseaudio-utils mpg123 sox lame opus-tools python3 avahi-daemon avahi-utils dbus iproute2 util-linux bc time \
	gnuplot-nox libportaudio2 chromium chromium-driver icecast2 ezstream openssl dpkg-dev binutils systemd alsa-utils qrencode mpd mpc \
	nodejs node-elliptic
# The tests' drivers from PyPI (scripts/test-requirements.txt, pinned) live in .venv.
VENV := .venv
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
FUZZ_SECONDS ?= 60

.PHONY: deps build-deps test-build test-resolve test-setup fixtures build release deb test check tsan demo fuzz bench bench-broadcast bench-footprint bench-sync bench-clock text-order proto clean

# Installs the Debian packages only when one is missing (apt-get update runs once, first): what the
# build compiles against, then the rest.
deps: build-deps
	@scripts/install-debs.sh $(PEER_PACKAGES)

build-deps:
	@scripts/install-debs.sh $(BUILD_PACKAGES)

# The tests' pinned PyPI packages, into .venv; again only when the list changes. Not compiled to
# bytecode here (a quarter of pip's CPU): Python compiles what a test imports, once, when it does.
$(VENV)/.installed: scripts/test-requirements.txt scripts/find-python.sh
	rm -rf $(VENV)
	"$$(scripts/find-python.sh)" -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --no-compile -r scripts/test-requirements.txt
	touch $@

$(FIXTURES)/.done: scripts/make-fixtures.sh | deps
	scripts/make-fixtures.sh $(FIXTURES)
	touch $@

fixtures: $(FIXTURES)/.done

build: deps
	swift build

release: deps
	swift build -c release

# Debian packages for this machine's architecture, here: partycast-listener_VERSION_ARCH.deb and
# partycast-broadcaster_…deb (stripped, with systemd units and /etc/default files; README, "Packages").
deb: deps
	swift build -c release --product listener
	swift build -c release --product broadcaster
	scripts/make-deb.sh .build/release .

# Every test, on one build in a scratch path of its own: PartyCast's own modules compiled as a release
# build compiles them (what users run, and free of debug-build jitter for the sync tests), testable
# for the tests' @testable imports (PARTYCAST_TESTABLE, read by Package.swift), and most dependencies
# unoptimized (scripts/test-swiftc says which and why). Four test
# classes run at a time (scripts/run-tests.sh); each class's output lands in .build-test/logs.
# First the build's Debian packages, the Swift packages' checkouts and the tests' venv, at once (network,
# disk and pip's one core); then the build takes both cores while the tests' peers and fixtures
# install beside it. On a new machine that hides most of the minutes apt and pip take.
TEST_TOOLCHAIN := $(CURDIR)/.build-test/toolchain
TEST_SWIFT := SWIFT_EXEC=$(TEST_TOOLCHAIN)/bin/swiftc PARTYCAST_CHECKOUTS=$(CURDIR)/.build-test/checkouts PARTYCAST_TESTABLE=1
TEST_BUILD := --scratch-path .build-test -c release
# A program that crashes while a test drives it prints its threads' backtraces into the output the
# test reports (Swift's backtracer; the static one needs no runtime libraries beside it).
TEST_BACKTRACE = enable=yes,interactive=no,swift-backtrace=$$(dirname "$$(head -1 $(TEST_TOOLCHAIN)/real-swiftc)")/../libexec/swift/linux/swift-backtrace-static
test:
	$(MAKE) --no-print-directory -j3 test-build test-setup
	PARTYCAST_FIXTURES=$(CURDIR)/$(FIXTURES) PARTYCAST_RELEASE_BIN=$(CURDIR)/.build-test/release PARTYCAST_VENV=$(CURDIR)/$(VENV) \
		SWIFT_BACKTRACE=$(TEST_BACKTRACE) scripts/run-tests.sh .build-test/release/PartyCastPackageTests.xctest .build-test/logs

test-build: build-deps test-resolve
	$(TEST_SWIFT) swift build $(TEST_BUILD) --build-tests

# The same compiler as the build's: SwiftPM compiles each package's manifest again for another.
test-resolve: $(TEST_TOOLCHAIN)/bin/swiftc
	$(TEST_SWIFT) swift package --scratch-path .build-test resolve

# scripts/test-swiftc where SwiftPM looks for the rest of a toolchain (../lib, for the tests'
# discovery through libIndexStore): beside the real toolchain's lib. SwiftPM does not see what the
# compiler adds to a command, nor a toolchain moved or upgraded behind the same SWIFT_EXEC, so a new
# wrapper or a new toolchain rebuilds everything.
$(TEST_TOOLCHAIN)/bin/swiftc: scripts/test-swiftc $(TEST_TOOLCHAIN)/real-swiftc
	rm -rf .build-test/$$(uname -m)-unknown-linux-gnu
	mkdir -p $(@D)
	ln -sfn "$$(dirname "$$(dirname "$$(readlink -f "$$(command -v swiftc)")")")/lib" $(TEST_TOOLCHAIN)/lib
	cp scripts/test-swiftc $@

# Which swiftc the wrapper runs, and its version; rewritten only when either changes.
$(TEST_TOOLCHAIN)/real-swiftc: FORCE
	@mkdir -p $(@D)
	@{ readlink -f "$$(command -v swiftc)" && swiftc --version; } > $@.new 2>&1
	@if cmp -s $@.new $@; then rm $@.new; else mv $@.new $@; fi

test-setup: deps fixtures $(VENV)/.installed

# The inner loop: the in-process tests on a debug build, without the classes that drive the programs
# or third-party servers (those run in `make test`).
END_TO_END := --skip '^(BroadcastTests|LANTests|PackagingTests|ListenerTests|SkewAnalyzerTests|HostileBroadcasterTests|HostileGuestTests)\.' \
	--skip '\.(IcecastTests|RemotePageBrowserTests|OpenAPIContractTests)/'
# The clock's soak simulations take minutes in a debug build (seconds in make test's release build).
# OrderKeptLinkTests take ~25 s of it and guard what the estimator's tuning most often breaks, so
# check runs them; tsan does not: single-threaded arithmetic, nothing there for it to watch.
SOAK := --skip 'testWindowStaysBoundedForTenMinutes|testConvergesUnderTwentyMillisecondsOfJitterEitherWay'
# Three tests at a time, each in a process of its own: many wait on a reference decoder or a socket.
check: deps fixtures $(VENV)/.installed
	swift build --build-tests
	PARTYCAST_FIXTURES=$(CURDIR)/$(FIXTURES) PARTYCAST_VENV=$(CURDIR)/$(VENV) swift test --skip-build --parallel --num-workers 3 $(END_TO_END) $(SOAK)

# ThreadSanitizer over the in-process unit tests, in its own build directory; the tests that only
# drive listener/broadcaster processes are skipped (the sanitizer watches this process alone).
# Known noise: on Linux a contended Synchronization.Mutex is taken in the uninstrumented stdlib
# (futex), so TSan misses its ordering and reports accesses made under the same Mutex, or handed
# over through one, as races.
tsan: deps fixtures
	swift build --build-tests --sanitize=thread --scratch-path .build-tsan
	PARTYCAST_FIXTURES=$(CURDIR)/$(FIXTURES) swift test --sanitize=thread --scratch-path .build-tsan --skip-build \
		$(END_TO_END) $(SOAK) --skip 'OrderKeptLinkTests' --skip 'PlayerTests.testALSAOutputDeliversTheStreamToTheDevice'

# A broadcaster and two listeners on this machine, sharing the tagged sample (see scripts/demo.sh).
demo: release fixtures
	scripts/demo.sh .build/release $(FIXTURES)/id3v2.mp3

# libFuzzer on the MP3 parser, the wire frame decoder, the listener's handling of message sequences
# and the clock datagrams, FUZZ_SECONDS each; crashes land in Fuzz/crashes/.
fuzz: deps fixtures
	cd Fuzz && swift build -c release -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library -Xswiftc -enable-testing
	mkdir -p Fuzz/corpus Fuzz/crashes
	find $(FIXTURES) -maxdepth 1 -type f -name '*.mp3' -exec cp -n {} Fuzz/corpus/ \;
	Fuzz/.build/release/MP3ParserFuzzer Fuzz/corpus -max_total_time=$(FUZZ_SECONDS) -max_len=16384 \
		-rss_limit_mb=2048 -artifact_prefix=Fuzz/crashes/ -print_final_stats=1
	mkdir -p Fuzz/corpus-wire
	Fuzz/.build/release/WireFrameFuzzer Fuzz/corpus-wire -max_total_time=$(FUZZ_SECONDS) -max_len=16384 \
		-rss_limit_mb=2048 -artifact_prefix=Fuzz/crashes/wire- -print_final_stats=1
	mkdir -p Fuzz/corpus-session
	Fuzz/.build/release/ListenerSessionFuzzer --write-seed Fuzz/corpus-session/seed
	Fuzz/.build/release/ListenerSessionFuzzer Fuzz/corpus-session -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
		-rss_limit_mb=2048 -artifact_prefix=Fuzz/crashes/session- -print_final_stats=1
	mkdir -p Fuzz/corpus-sendspin
	Fuzz/.build/release/SendspinClientFuzzer Fuzz/corpus-sendspin -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
		-rss_limit_mb=2048 -artifact_prefix=Fuzz/crashes/sendspin- -print_final_stats=1
	mkdir -p Fuzz/corpus-clock
	Fuzz/.build/release/ClockDatagramFuzzer Fuzz/corpus-clock -max_total_time=$(FUZZ_SECONDS) -max_len=512 \
		-rss_limit_mb=2048 -artifact_prefix=Fuzz/crashes/clock- -print_final_stats=1

# Broadcaster CPU for a 30 s song with 1, 10, 50 and 200 listeners on loopback (bar: 50 ≤ 3 × 1);
# each must get the whole song. BENCH_LISTENERS="1 50" picks the counts.
bench-broadcast: release
	scripts/bench-broadcast.sh $(BENCH_LISTENERS)

# Footprint against Debian's Snapcast (installed by the script): listener vs snapclient, broadcaster vs
# snapserver with 1 and 10 clients, CPU s and peak RSS, median of BENCH_RUNS (bars: see the script).
bench-footprint: release
	scripts/bench-footprint.sh

# Party-mode sync on the LAN harness, then over bad links (badlink.sh): skew between listeners from
# their recordings (needs root). BENCH_SYNC=links runs only the link table.
bench-sync: release
	scripts/bench-sync.sh

# The clock estimator before issue 11 against the current one on simulated links (jitter, loss,
# stalls, TCP head-of-line queueing, asymmetric load): error percentiles per trace, ~15 s; then
# the floor oracle and the estimator with the link to themselves, however it is probed, ~4 min.
bench-clock: deps
	swift build -c release --product partycast-clock-sim
	.build/release/partycast-clock-sim --seeds 16 --duration 90
	.build/release/partycast-clock-sim --seeds 64 --duration 36 --floor-oracle --trace "order kept"
	.build/release/partycast-clock-sim --seeds 100 --duration 45 --judged-from 11 --probing-limit

# Decode speed against mpg123 -t (a 5-minute 320 kbps file); prints the ratio.
bench: release
	scripts/bench-decode.sh

# Records which functions the listener runs (callgrind over parties and local files) into
# Sources/listener/link/text-order.txt and relinks it (SwiftPM does not see that file change).
text-order: release fixtures
	scripts/order-listener-text.sh .build/release $(FIXTURES)
	rm -f .build/release/listener
	swift build -c release --product listener

# Regenerates the Swift for Proto/partycast.proto (builds protoc-gen-swift once, ~1-10 min).
proto: deps
	@command -v protoc >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq protobuf-compiler; }
	scripts/gen-proto.sh

clean:
	rm -rf .build Fuzz/.build $(FIXTURES)

# A prerequisite that is always out of date, for rules that decide for themselves whether to write.
FORCE:
