/// Frames ↔ nanoseconds without overflow on the way: frames × 10⁹ overflows 64 bits after about two
/// days at 48 kHz, so the whole seconds and the remainder are converted apart. A party that loops for
/// months, or a hostile peer's numbers, get an exact answer or nil, never a trap.
public enum StreamTime {
    /// How long `frames` last at `sampleRate` (rounded toward zero); nil when that does not fit in Int64.
    public static func nanoseconds(frames: Int64, sampleRate: Int) -> Int64? {
        guard sampleRate > 0 else { return nil }
        let rate = Int64(sampleRate)
        let (seconds, remainder) = frames.quotientAndRemainder(dividingBy: rate)
        let (whole, overflowed) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflowed else { return nil }
        // |remainder| < rate ≤ Int32.max, so remainder × 10⁹ fits.
        let (total, overflowedSum) = whole.addingReportingOverflow(remainder * 1_000_000_000 / rate)
        return overflowedSum ? nil : total
    }
}
