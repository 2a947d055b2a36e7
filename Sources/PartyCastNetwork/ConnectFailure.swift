import NIOCore
import NIOPosix
#if canImport(Glibc)
import Glibc
#endif

/// Why a connection could not be made, in a few words (NIO's error lists every address it tried,
/// each with its errno), and whether every address refused it; nil for an error that is no
/// failure to connect. One wording for the remote control's client and the Sendspin dialler.
public func connectFailure(_ error: any Error) -> (reason: String, refused: Bool)? {
    switch error {
    case let failed as NIOConnectionError:
        let errnos = failed.connectionErrors.compactMap { ($0.error as? IOError)?.errnoCode }
        if !errnos.isEmpty && errnos.allSatisfy({ $0 == ECONNREFUSED }) { return ("connection refused", true) }
        if let code = errnos.first(where: { $0 != ECONNREFUSED }) { return (errnoReason(code), false) }
        if let other = failed.connectionErrors.first?.error { return ("\(other)", false) }
        return ("no address found for \(failed.host)", false)
    case ChannelError.connectTimeout(let waited):
        return ("no answer within \(waited.nanoseconds / 1_000_000_000) s", false)
    default:
        return nil
    }
}

/// A failed `connect` in a few words, for the one-line error a user reads: `connectFailure`'s
/// reason, or the errno of a connect to one address (NIO throws a bare IOError then).
public func connectError(_ error: any Error) -> String {
    if let failure = connectFailure(error) { return failure.reason }
    if let failed = error as? IOError { return errnoReason(failed.errnoCode) }
    return "\(error)"
}

/// An errno as a few lowercase words ("connection reset by peer").
public func errnoReason(_ code: Int32) -> String { String(cString: strerror(code)).lowercased() }
