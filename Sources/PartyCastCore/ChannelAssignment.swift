import Synchronization

/// Which of the source's channels a listener plays on every one of its outputs. Two speakers set
/// `left` and `right` are a stereo pair; `mono` suits a single speaker with one driver.
public enum ChannelAssignment: String, CaseIterable, Codable, Sendable {
    /// Each output channel plays the source's same channel.
    case stereo
    /// The source's left (first) channel on every output channel.
    case left
    /// The source's right (second) channel on every output channel.
    case right
    /// (left + right) / 2 on every output channel.
    case mono

    /// The names a user types, for help texts and refusals.
    public static let names = allCases.map(\.rawValue).joined(separator: "|")

    /// Refuses any other name with the ones it takes (and without repeating what it was sent).
    public init(from decoder: any Decoder) throws {
        let name = try decoder.singleValueContainer().decode(String.self)
        guard let assignment = Self(rawValue: name) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "it takes \(Self.names)"))
        }
        self = assignment
    }
}

/// So the output thread can read the current assignment without a lock (the remote changes it while playing).
extension ChannelAssignment: AtomicRepresentable {
    public typealias AtomicRepresentation = UInt8.AtomicRepresentation

    private var code: UInt8 {
        switch self {
        case .stereo: 0
        case .left: 1
        case .right: 2
        case .mono: 3
        }
    }

    public static func encodeAtomicRepresentation(_ value: consuming ChannelAssignment) -> AtomicRepresentation {
        UInt8.encodeAtomicRepresentation(value.code)
    }

    public static func decodeAtomicRepresentation(_ storage: consuming AtomicRepresentation) -> ChannelAssignment {
        switch UInt8.decodeAtomicRepresentation(storage) {
        case 1: .left
        case 2: .right
        case 3: .mono
        default: .stereo
        }
    }
}
