import CAvahi
import PartyCastCore

/// Finds and resolves the services of one DNS-SD type on the LAN (IPv4): PartyCast broadcasters'
/// `_partycast._tcp` unless told otherwise.
public enum ServiceBrowser {
    /// Browses for up to `timeout` seconds, returning early once avahi has reported everything it
    /// knows ("all for now") and every resolve has answered, or, `waitingFor` a name, once a service
    /// of that name has resolved. One entry per service name, sorted. Throws when avahi-daemon is not
    /// running (or goes away meanwhile).
    public static func browse(type: String = PartyCastService.type, timeout: Double,
                              waitingFor name: String? = nil) throws(PartyCastError) -> [DiscoveredService] {
        guard timeout.isFinite, timeout >= 0 else {
            throw PartyCastError(.invalidArgument, "mDNS: the browse timeout must be 0 seconds or more, not \(timeout)")
        }
        let loop = try AvahiLoop()
        let session = BrowseSession(changed: loop.changed)
        let context = Unmanaged.passUnretained(session).toOpaque()
        return try withExtendedLifetime(session) { () throws(PartyCastError) -> [DiscoveredService] in
            var code: Int32 = 0
            let client = try Avahi.newClient(loop.api, waitForDaemon: false, { client, state, context in
                if state == AVAHI_CLIENT_FAILURE, let client {
                    BrowseSession.from(context).fail(Avahi.error("lost avahi-daemon while browsing", Avahi.clientErrno(client)))
                }
            }, context, code: &code)
            // Runs before `loop` goes (its deinit joins the thread and frees the poll): stop the
            // thread, then free what is left, resolvers before the client that owns them.
            defer {
                loop.stop()
                for resolver in session.resolvers { Avahi.freeServiceResolver(resolver) }
                if let browser = session.browser { Avahi.freeServiceBrowser(browser) }
                Avahi.freeClient(client)
            }
            session.browser = try Avahi.newServiceBrowser(client, type: type, { browser, interface, proto, event, name, type, domain, _, context in
                let session = BrowseSession.from(context)
                switch event {
                case AVAHI_BROWSER_NEW:
                    guard let browser, let name, let type, let client = Avahi.browserClient(browser) else { return }
                    do throws(PartyCastError) {
                        let resolver = try Avahi.newServiceResolver(client, interface: interface, protocol: proto,
                                                                    name: name, type: type, domain: domain, BrowseSession.resolved, context!)
                        session.resolvers.insert(resolver)
                    } catch {
                        session.fail(error)
                    }
                case AVAHI_BROWSER_ALL_FOR_NOW:
                    session.allForNow = true
                case AVAHI_BROWSER_FAILURE:
                    session.fail(Avahi.error("browsing failed", browser.flatMap(Avahi.browserClient).map(Avahi.clientErrno) ?? Int32(AVAHI_ERR_FAILURE)))
                default:
                    break
                }
            }, context)
            try loop.start()

            loop.wait(until: monotonicNanoseconds() + UInt64(timeout * 1e9)) {
                loop.locked {
                    if session.failure != nil { return true }
                    guard let name else { return session.allForNow && session.resolvers.isEmpty }
                    return session.found.contains { $0.name == name }
                }
            }
            let (found, failure) = loop.locked { (session.found, session.failure) }
            if let failure { throw failure }
            // One entry per name (a service seen on several interfaces resolves once per interface).
            var unique: [String: DiscoveredService] = [:]
            for service in found where unique[service.name] == nil { unique[service.name] = service }
            return unique.values.sorted { $0.name < $1.name }
        }
    }
}

/// What one browse collects; touched on avahi's thread, or with the loop's lock held.
final class BrowseSession {
    var browser: OpaquePointer?
    var resolvers: Set<OpaquePointer> = []
    var found: [DiscoveredService] = []
    var allForNow = false {
        didSet { changed.signal() }
    }
    var failure: PartyCastError?
    /// The loop's: signalled at each step toward done (all for now, a resolver answered, a failure).
    let changed: Wakeup

    init(changed: Wakeup) { self.changed = changed }

    static func from(_ context: UnsafeMutableRawPointer?) -> BrowseSession {
        Unmanaged<BrowseSession>.fromOpaque(context!).takeUnretainedValue()
    }

    func fail(_ error: PartyCastError) {
        if failure == nil { failure = error }
        changed.signal()
    }

    /// A resolver's answer (or failure to answer): it is done either way.
    static let resolved: AvahiServiceResolverCallback = { resolver, _, _, event, name, _, _, host, address, port, txt, _, context in
        let session = BrowseSession.from(context)
        if event == AVAHI_RESOLVER_FOUND, let name, let host, let address {
            session.found.append(DiscoveredService(name: String(cString: name), hostName: String(cString: host),
                                                   address: Avahi.addressText(address), port: Int(port), txt: Avahi.pairs(txt)))
        }
        // A resolver that cannot find its service (it left meanwhile) just drops out.
        if let resolver, session.resolvers.remove(resolver) != nil { Avahi.freeServiceResolver(resolver) }
        session.changed.signal()
    }
}
