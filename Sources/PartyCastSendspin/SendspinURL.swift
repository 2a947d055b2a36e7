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
        // A URL's IPv6 host is in brackets (RFC 3986), where a bare one could be taken for a port.
        guard authority.hasPrefix("[") || authority.filter({ $0 == ":" }).count <= 1 else {
            throw PartyCastError(.invalidArgument, "an IPv6 address in a Sendspin URL goes in brackets, its port after them: ws://[ADDRESS]:PORT/sendspin, not \(text)")
        }
        let parsed: HostAndPort
        do { parsed = try HostAndPort(parsing: authority, defaultPort: defaultPort) } catch {
            throw PartyCastError(.invalidArgument, "a Sendspin URL is ws://HOST:PORT/sendspin: \(error.message)")
        }
        host = parsed.host
        port = parsed.port
        self.path = path.isEmpty ? "/sendspin" : String(path)
    }

    /// HOST:PORT, an IPv6 host in brackets: the HTTP Host header's value.
    public var authority: String { HostAndPort(host: host, port: port).description }

    public var description: String { "ws://\(authority)\(path)" }
}
