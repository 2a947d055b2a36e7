/// The single error type every failure in PartyCast is turned into before it reaches a person:
/// a stable code (which also picks the process exit status) and a message saying what to do.
public struct PartyCastError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable, CaseIterable {
        case fileNotFound = "file-not-found"
        case isDirectory = "is-directory"
        case permissionDenied = "permission-denied"
        case notAudio = "not-audio"
        case unsupportedFormat = "unsupported-format"
        case io = "io"
        case decoder = "decoder"
        case output = "output"
        case invalidArgument = "invalid-argument"
        /// The peer speaks another protocol version, or broke the protocol in a way retrying can't mend.
        case incompatible = "incompatible"
        /// A private party's key handshake failed: no key, a different key, or a peer that can't prove it.
        case key = "key"

        /// The process exit status for this kind of error, the same in every PartyCast program and
        /// documented in the README. Fixed numbers: adding or reordering codes never changes them.
        /// 0 is success (or the user quit); 64 is a usage error, as the argument parser reports it.
        public var exitStatus: Int32 {
            switch self {
            case .fileNotFound: 2
            case .isDirectory: 3
            case .permissionDenied: 4
            case .notAudio: 5
            case .unsupportedFormat: 6
            case .io: 7
            case .decoder: 8
            case .output: 9
            case .invalidArgument: 10
            case .incompatible: 11
            case .key: 12
            }
        }
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "error [\(code.rawValue)]: \(message)" }
}
