import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import PartyCastControlSeam
import PartyCastCore

/// The names and addresses this broadcaster answers to. A request whose Host is anything else was
/// meant for some other server: a web page whose own name an attacker re-pointed at this machine (DNS
/// rebinding) sends its own name as Host, and is refused before any route runs.
public struct OwnNames: Sendable {
    let names: Set<String>

    public init(_ names: some Sequence<String>) {
        self.names = Set(names.map(Self.normalized))
    }

    /// localhost, this machine's name (bare and .local, as mDNS gives it), the bound address, and
    /// every address of every interface (what a listener typed, or a QR code carries).
    public static func current(bind: String) -> OwnNames {
        let host = localHostName()
        var names = ["localhost", "127.0.0.1", "::1", host, host + ".local", bind]
        do {
            names += try System.enumerateDevices().compactMap { $0.address?.ipAddress }
        } catch {
            // Without the interface list only the names above and loopback match: a stricter check.
        }
        return OwnNames(names)
    }

    /// Whether `authority` (Host: name or address, with or without a port) is one of ours.
    public func allows(authority: String) -> Bool {
        names.contains(Self.normalized(Self.host(of: authority)))
    }

    /// The host part of `name:port`, `[v6]:port`, `[v6]`, `v6` or `name`.
    static func host(of authority: String) -> Substring {
        if authority.hasPrefix("["), let end = authority.firstIndex(of: "]") {
            return authority[authority.index(after: authority.startIndex)..<end]
        }
        let colons = authority.filter { $0 == ":" }.count
        if colons == 1, let colon = authority.firstIndex(of: ":") { return authority[..<colon] }
        return Substring(authority)
    }

    private static func normalized(_ name: some StringProtocol) -> String {
        var name = name.lowercased()
        if name.hasSuffix(".") { name.removeLast() }  // "host.local." names the same host
        return name
    }
}

/// 421 for a request whose Host is not one of the broadcaster's own names. A request without Host
/// (HTTP/1.0) cannot come from a browser, which always sends it, so it passes.
struct HostCheck<Context: RequestContext>: RouterMiddleware {
    let names: OwnNames
    let refusals: Refusals

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let authority = request.head.authority, !names.allows(authority: authority) {
            refusals.refuse(.foreignHost, "remote control: refused \(request.method) \(String(untrusted: request.uri.path, limit: 60)) "
                            + "for host \"\(String(untrusted: authority, limit: 60))\" (not one of this broadcaster's names)")
            throw APIError(.misdirectedRequest, "this is not \(String(untrusted: authority, limit: 60)): use this broadcaster's own name or address")
        }
        return try await next(request, context)
    }
}

/// Commands (anything but GET) per client address: a burst, then a few a second. Reading status
/// is left free; a remote that drives the party faster than a person could is refused with 429.
final class CommandRate: Sendable {
    static let burst = 50.0
    static let perSecond = 10.0
    /// Addresses remembered; beyond it the table starts over (an attacker with more addresses
    /// than this gets a fresh burst each, still bounded per address).
    static let maxAddresses = 4096
    private let buckets = NIOLockedValueBox<[String: TokenBucket]>([:])

    func allows(_ address: String, now: UInt64 = monotonicNanoseconds()) -> Bool {
        buckets.withLockedValue { buckets in
            if buckets[address] == nil && buckets.count >= Self.maxAddresses { buckets.removeAll(keepingCapacity: true) }
            var bucket = buckets[address] ?? TokenBucket(burst: Self.burst, perSecond: Self.perSecond, now: now)
            defer { buckets[address] = bucket }
            return bucket.take(now: now)
        }
    }
}

struct CommandRateLimit<Context: RequestContext & RemoteAddressRequestContext>: RouterMiddleware {
    let rate: CommandRate
    let refusals: Refusals

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let address = context.remoteAddress?.ipAddress ?? "?"
        guard request.method == .get || rate.allows(address) else {
            refusals.refuse(.controlCommands, "remote control: refused a command from \(address): more than \(Int(CommandRate.perSecond)) a second")
            throw APIError(.tooManyRequests, "too many commands: at most \(Int(CommandRate.perSecond)) a second", headers: [.retryAfter: "1"])
        }
        return try await next(request, context)
    }
}

/// The control port's request context: Hummingbird's, plus the client's address (for the
/// per-address limits).
struct ControlContext: RequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    let remoteAddress: SocketAddress?

    init(source: Source) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}
