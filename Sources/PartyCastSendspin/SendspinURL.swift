import PartyCastCore

/// Where a Sendspin peer listens: `ws://HOST[:PORT][/PATH]` (the spec's path is /sendspin; its
/// ports are 8927 for servers, 8928 for players that wait for servers).
public struct SendspinURL: Sendable, Equatable, CustomStringConvertible {
    public static let serverPort = 8927
    public static let playerPort = 8928

    public let host: String
    public let port: Int
    public let path: String

    public init(parsing text: String, defaultPort: Int = SendspinURL.serverPort) throws(PartyCastError) {
        guard text.hasPrefix("ws://") else { throw PartyCastError(.invalidArgument, "a Sendspin URL is ws://HOST:PORT/sendspin (wss:// is not supported)") }
        let rest = text.dropFirst(5)
        let authority = rest.prefix { $0 != "/" }
        let path = rest.dropFirst(authority.count)
        // [v6]:port or host:port or host.
        var host = String(authority), port = defaultPort
        if let close = authority.lastIndex(of: "]"), authority.hasPrefix("[") {
            host = String(authority[authority.index(after: authority.startIndex)..<close])
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let number = Int(after.dropFirst()) else { throw PartyCastError(.invalidArgument, "bad port in \(text)") }
                port = number
            }
        } else if authority.filter({ $0 == ":" }).count > 1 {
            throw PartyCastError(.invalidArgument, "an IPv6 address in a Sendspin URL goes in brackets, its port after them: ws://[ADDRESS]:PORT/sendspin, not \(text)")
        } else if let colon = authority.lastIndex(of: ":") {
            host = String(authority[..<colon])
            guard let number = Int(authority[authority.index(after: colon)...]) else { throw PartyCastError(.invalidArgument, "bad port in \(text)") }
            port = number
        }
        guard !host.isEmpty, (1...65535).contains(port) else { throw PartyCastError(.invalidArgument, "a Sendspin URL is ws://HOST:PORT/sendspin") }
        self.host = host
        self.port = port
        self.path = path.isEmpty ? "/sendspin" : String(path)
    }

    /// HOST:PORT, an IPv6 host in brackets: the HTTP Host header's value.
    public var authority: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    public var description: String { "ws://\(authority)\(path)" }
}
