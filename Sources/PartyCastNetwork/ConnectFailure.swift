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

/// An errno as a few lowercase words ("connection reset by peer").
public func errnoReason(_ code: Int32) -> String { String(cString: strerror(code)).lowercased() }
