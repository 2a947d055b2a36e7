import PartyCastCore

extension ChannelAssignment {
    /// What a peer said; nil when it said nothing (CHANNEL_UNSPECIFIED) or a value this build does not know.
    public init?(wire: PCChannelAssignment) {
        switch wire {
        case .stereo: self = .stereo
        case .left: self = .left
        case .right: self = .right
        case .mono: self = .mono
        case .channelUnspecified, .UNRECOGNIZED: return nil
        }
    }

    public var wire: PCChannelAssignment {
        switch self {
        case .stereo: .stereo
        case .left: .left
        case .right: .right
        case .mono: .mono
        }
    }
}
