import PartyCastCore

/// The listener's notion of time, in nanoseconds: CLOCK_MONOTONIC itself, or a simulated clock
/// that reads `offset` ahead and runs `driftPPM` fast (negative: slow) against it, so sync can be
/// tested on one machine as if each listener had its own crystal. Clock sync, scheduling and the
/// `virtual:` card all read this clock; only sleeping converts back to the machine's clock.
public struct LocalClock: Sendable, Equatable {
    public let offsetNanoseconds: Int64
    public let driftPPM: Double
    /// Machine time at which the simulated clock reads exactly machine time + offset.
    public let anchor: UInt64

    public static let system = LocalClock(offsetNanoseconds: 0, driftPPM: 0, anchor: 0)

    public init(offsetSeconds: Double, driftPPM: Double, anchor: UInt64 = monotonicNanoseconds()) {
        self.init(offsetNanoseconds: Int64((offsetSeconds * 1e9).rounded()), driftPPM: driftPPM, anchor: anchor)
    }

    /// The clock a `ClockExchangeLog` recorded.
    init(offsetNanoseconds: Int64, driftPPM: Double, anchor: UInt64) {
        self.offsetNanoseconds = offsetNanoseconds
        self.driftPPM = driftPPM
        self.anchor = anchor
    }

    public var isSimulated: Bool { self != .system }

    /// Now, on this clock.
    @inline(__always)
    public func now() -> Int64 { local(fromMachine: monotonicNanoseconds()) }

    @inline(__always)
    public func local(fromMachine machine: UInt64) -> Int64 {
        let elapsed = Int64(bitPattern: machine &- anchor)
        return Int64(bitPattern: machine) &+ offsetNanoseconds &+ Int64((Double(elapsed) * driftPPM * 1e-6).rounded())
    }

    @inline(__always)
    public func machine(fromLocal local: Int64) -> UInt64 {
        // local − anchor − offset = elapsed × (1 + drift); solve for elapsed. A clock log's readings
        // (±2⁶² each, a day's offset) can lie far enough apart to overflow Int64: there the difference
        // is taken in Double, and an elapsed time beyond Int64 saturates.
        let (partial, overflow) = local.subtractingReportingOverflow(Int64(bitPattern: anchor))
        let (difference, overflowAgain) = partial.subtractingReportingOverflow(offsetNanoseconds)
        let scaled = overflow || overflowAgain
            ? Double(local) - Double(Int64(bitPattern: anchor)) - Double(offsetNanoseconds) : Double(difference)
        let elapsed = (scaled / (1 + driftPPM * 1e-6)).rounded()
        let whole = elapsed >= 0x1p63 ? Int64.max : elapsed >= -0x1p63 ? Int64(elapsed) : Int64.min
        return anchor &+ UInt64(bitPattern: whole)
    }

    /// Sleeps until this clock reads `local`.
    public func sleep(until local: Int64) {
        sleepUntil(monotonicNanoseconds: machine(fromLocal: local))
    }
}
