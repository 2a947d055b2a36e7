#if canImport(Glibc)
import Glibc
#endif
import PartyCastCore

/// Every exchange a listener's estimator takes, as text (`listener join --clock-log FILE`), so its
/// errors on a real link can be replayed exactly and estimator changes judged on real delays
/// (`partycast-clock-sim --replay`), not only on simulated ones:
///
///     # partycast clock log 1: offset-ns -5000000000 drift-ppm -150 anchor-ns 123456789
///     t1 t2 t3 t4
///
/// The header is the listener's clock (`--simulate-clock`); then one exchange a line in the order
/// taken, in nanoseconds (t1, t4 on that clock; t2, t3 on the broadcaster's). Where the broadcaster
/// ran on the same machine (bench-sync, the tests) its clock is CLOCK_MONOTONIC, so the replay knows
/// the true offset at every instant.
public final class ClockExchangeLog: Sendable {
    static let headerPrefix = "# partycast clock log 1: "
    private let fd: Int32

    public init(path: String, clock: LocalClock) throws(PartyCastError) {
        do {
            fd = try systemCall("open") { open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644) }
        } catch {
            throw PartyCastError(.output, "cannot create \(path): \(error)")
        }
        append(Self.headerPrefix + "offset-ns \(clock.offsetNanoseconds) drift-ppm \(clock.driftPPM) anchor-ns \(clock.anchor)\n")
    }

    deinit { close(fd) }

    /// Written as they are taken, unbuffered: a listener that is killed has logged every exchange
    /// it took. A failed write (a full disk) loses those lines, never the party.
    func append(_ samples: some Sequence<ClockSample>) {
        var text = ""
        for sample in samples { text += "\(sample.t1) \(sample.t2) \(sample.t3) \(sample.t4)\n" }
        if !text.isEmpty { append(text) }
    }

    private func append(_ text: String) {
        var text = text
        text.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count,
                  let written = try? systemCall("write", { write(fd, bytes.baseAddress! + offset, bytes.count - offset) }),
                  written > 0 {
                offset += written
            }
        }
    }

    /// A log's clock and exchanges. Lines that do not parse, or hold times no clock reads, are
    /// skipped and counted.
    public struct Contents: Sendable {
        public var clock: LocalClock
        public var samples: [ClockSample]
        public var skippedLines: Int

        /// Each exchange's one-way delays in the order taken (ns): up, t2 against the machine's time
        /// at t1; down, the machine's time at t4 against t3. The true delays where the broadcaster's
        /// clock was the machine's, as in bench-sync: what the estimator's evidence is measured by.
        public var oneWayDelays: [(up: Int64, down: Int64)] {
            func machine(_ local: Int64) -> Int64 { Int64(bitPattern: clock.machine(fromLocal: local)) }
            return samples.map { (up: $0.t2 &- machine($0.t1), down: machine($0.t4) &- $0.t3) }
        }

        /// The exchanges run again through a fresh `ClockEstimator` in the order taken, its mapping
        /// probed every `interval` of the local clock from `judgedFrom` after the first exchange:
        /// `probe` gets the probe's local time, the mapping's error against the truth (remote ns), the
        /// mapping and the estimator, once it has one. False, probing nothing, when the log spans more
        /// than a day (a hostile file would otherwise set the number of probes).
        public func replay(judgedFrom: Int64, every interval: Int64,
                           _ probe: (_ local: Int64, _ error: Int64, _ mapping: ClockMapping, _ estimator: ClockEstimator) -> Void) -> Bool {
            guard let first = samples.first, let last = samples.last else { return true }
            // Times are within ±2⁶² (`plausibleTime`), so the span cannot overflow.
            guard last.t4 - first.t1 <= 86_400_000_000_000, interval > 0 else { return false }
            // Before the first exchange there is no mapping to probe; centuries after it, no exchange.
            let (start, overflow) = first.t1.addingReportingOverflow(max(0, judgedFrom))
            guard !overflow else { return true }
            var estimator = ClockEstimator()
            var taken = 0
            for local in stride(from: start, through: last.t4, by: Int(interval)) {
                while taken < samples.count, samples[taken].t4 <= local {
                    estimator.add(samples[taken])
                    taken += 1
                }
                guard let mapping = estimator.mapping else { continue }
                probe(local, mapping.remote(fromLocal: local) &- Int64(bitPattern: clock.machine(fromLocal: local)), mapping, estimator)
            }
            return true
        }
    }

    /// Clock readings a log may hold: CLOCK_MONOTONIC and what `--simulate-clock` makes of it are
    /// far inside, and the clock's arithmetic cannot overflow on them.
    static let plausibleTime: ClosedRange<Int64> = -(1 << 62)...(1 << 62)

    /// Reads a log written by `ClockExchangeLog`; nil when the header is missing or is not a clock
    /// whose arithmetic is safe (an offset within a day, a drift within ±10000 ppm: wider than
    /// `--simulate-clock` takes, so logs of older builds still read).
    public static func read(_ text: Substring) -> Contents? {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: true)[...]
        guard let header = lines.popFirst(), header.hasPrefix(headerPrefix) else { return nil }
        let fields = header.dropFirst(headerPrefix.count).split(separator: " ")
        guard fields.count == 6, fields[0] == "offset-ns", fields[2] == "drift-ppm", fields[4] == "anchor-ns",
              let offset = Int64(fields[1]), offset.magnitude <= 86_400_000_000_000,
              let drift = Double(fields[3]), abs(drift) <= 10_000,
              let anchor = UInt64(fields[5]), anchor <= UInt64(plausibleTime.upperBound)
        else { return nil }
        var contents = Contents(clock: LocalClock(offsetNanoseconds: offset, driftPPM: drift, anchor: anchor),
                                samples: [], skippedLines: 0)
        for line in lines {
            let fields = line.split(separator: " ")
            let times = fields.compactMap { Int64($0) }.filter(plausibleTime.contains)
            guard fields.count == 4, times.count == 4 else {
                contents.skippedLines += 1
                continue
            }
            contents.samples.append(ClockSample(t1: times[0], t2: times[1], t3: times[2], t4: times[3]))
        }
        return contents
    }
}
