/// What `partycast-skew --json` prints; figures are absent for a recording without settled points.
public struct SkewReport: Decodable {
    public struct Summary: Decodable {
        public let name: String
        public let points: Int
        public let medianMicroseconds: Double?
        public let p99Microseconds: Double?
        public let maxMicroseconds: Double?
        public let convergedAfterSeconds: Double?
    }

    /// With `--gaps`: each recording's song length and its longest run of exact zeros mid-song.
    public struct Gap: Decodable {
        public let name: String
        public let songFrames: Int
        public let longestGapMs: Double
        public let longestGapAtSeconds: Double
    }

    public let summaries: [Summary]
    public let gaps: [Gap]?
}
