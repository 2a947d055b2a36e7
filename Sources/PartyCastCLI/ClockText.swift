/// mm:ss for a position or duration; "--:--" for anything no real stream has (negative, NaN, absurd).
public func clockText(_ seconds: Double) -> String {
    guard seconds.isFinite, seconds >= 0, seconds < 1e9 else { return "--:--" }
    let total = Int(seconds.rounded(.down))
    let (m, s) = (total / 60, total % 60)
    return "\(m < 10 ? "0" : "")\(m):\(s < 10 ? "0" : "")\(s)"
}
