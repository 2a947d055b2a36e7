/// The Theil–Sen line through a few points: its slope the median of the slopes between every two,
/// read at time 0 as the median of the points' values carried there along it. Up to ~29 % of the
/// points may lie anywhere without moving it far, where one point drags a least-squares line.
/// Storage is sized once; a fit is O(n² log n), for the tens of points it is meant for.
struct MedianLine: Sendable {
    private var times: [Double]
    private var values: [Double]
    private var scratch: [Double]
    private(set) var count = 0

    init(capacity: Int) {
        times = Array(repeating: 0, count: capacity)
        values = Array(repeating: 0, count: capacity)
        scratch = Array(repeating: 0, count: max(capacity, capacity * (capacity - 1) / 2))
    }

    mutating func removeAll() { count = 0 }

    /// Ignored once full.
    mutating func append(time: Double, value: Double) {
        guard count < times.count else { return }
        (times[count], values[count]) = (time, value)
        count += 1
    }

    /// The line's value at time 0; nil below two points or with all at one time.
    mutating func level() -> Double? {
        var slopes = 0
        for later in 0..<count {
            for earlier in 0..<later where times[later] != times[earlier] {
                scratch[slopes] = (values[later] - values[earlier]) / (times[later] - times[earlier])
                slopes += 1
            }
        }
        guard slopes > 0 else { return nil }
        let slope = Self.median(&scratch[0..<slopes])
        for index in 0..<count { scratch[index] = values[index] - slope * times[index] }
        return Self.median(&scratch[0..<count])
    }

    private static func median(_ values: inout ArraySlice<Double>) -> Double {
        values.sort()
        let middle = values.startIndex + values.count / 2
        return values.count % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2
    }
}
