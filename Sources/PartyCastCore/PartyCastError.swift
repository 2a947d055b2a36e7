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

        /// Exit statuses 2…10; 1 is left to the argument parser for usage errors.
        public var exitStatus: Int32 {
            Int32(Code.allCases.firstIndex(of: self)!) + 2
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
