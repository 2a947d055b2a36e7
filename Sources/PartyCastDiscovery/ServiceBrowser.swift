import CAvahi
import PartyCastCore
import Synchronization

/// Finds and resolves the `_partycast._tcp` services on the LAN.
public enum ServiceBrowser {
    /// Browses for up to `timeout` seconds, returning early once avahi has reported everything it
    /// knows and every resolve has answered.
    public static func browse(timeout: Double) throws(PartyCastError) -> [DiscoveredService] {
        let session = BrowseSession()
        let connection = try AvahiConnection(waitForDaemon: false) { _ in }
        defer { connection.close() }
        guard let client = connection.client else { throw PartyCastError(.io, "avahi: no client") }
        let context = Unmanaged.passUnretained(session).toOpaque()
        let browser = avahi_service_browser_new(client, Int32(AVAHI_IF_UNSPEC), Int32(AVAHI_PROTO_INET), PartyCastService.type, nil,
                                                AvahiLookupFlags(rawValue: 0), { browser, interface, proto, event, name, type, domain, _, context in
            let session = Unmanaged<BrowseSession>.fromOpaque(context!).takeUnretainedValue()
            switch event {
            case AVAHI_BROWSER_NEW:
                let client = avahi_service_browser_get_client(browser)
                session.pending += 1
                let resolver = avahi_service_resolver_new(client, interface, proto, name, type, domain, Int32(AVAHI_PROTO_INET),
                                                          AvahiLookupFlags(rawValue: 0), { resolver, _, _, event, name, _, _, host, address, port, txt, _, context in
                    let session = Unmanaged<BrowseSession>.fromOpaque(context!).takeUnretainedValue()
                    if event == AVAHI_RESOLVER_FOUND, let name, let host, let address {
                        var text = [CChar](repeating: 0, count: Int(AVAHI_ADDRESS_STR_MAX))
                        avahi_address_snprint(&text, text.count, address)
                        session.found.append(DiscoveredService(name: String(cString: name), hostName: String(cString: host),
                                                               address: String(cString: text), port: Int(port), txt: BrowseSession.pairs(txt)))
                    }
                    session.pending -= 1
                    avahi_service_resolver_free(resolver)
                }, context)
                if resolver == nil { session.pending -= 1 }
            case AVAHI_BROWSER_ALL_FOR_NOW:
                session.allForNow = true
            case AVAHI_BROWSER_FAILURE:
                session.failure = AvahiConnection.message(avahi_client_errno(avahi_service_browser_get_client(browser)))
            default:
                break
            }
        }, context)
        guard let browser else { throw PartyCastError(.io, "avahi: cannot browse: \(connection.lastError)") }
        try connection.start()
        let deadline = monotonicNanoseconds() + UInt64(timeout * 1e9)
        while monotonicNanoseconds() < deadline {
            sleepUntil(monotonicNanoseconds: monotonicNanoseconds() + 20_000_000)
            let done = connection.locked { session.failure != nil || (session.allForNow && session.pending == 0) }
            if done { break }
        }
        let (found, failure) = connection.locked { () -> ([DiscoveredService], String?) in
            avahi_service_browser_free(browser)
            return (session.found, session.failure)
        }
        if let failure { throw PartyCastError(.io, "avahi: browsing failed: \(failure)") }
        // One entry per name (a service seen on several interfaces resolves several times).
        var unique: [String: DiscoveredService] = [:]
        for service in found where unique[service.name] == nil { unique[service.name] = service }
        return unique.values.sorted { $0.name < $1.name }
    }
}

/// What the browse callbacks collect; touched only with the avahi loop's lock held.
final class BrowseSession {
    var found: [DiscoveredService] = []
    var pending = 0
    var allForNow = false
    var failure: String?

    static func pairs(_ list: UnsafeMutablePointer<AvahiStringList>?) -> [String: String] {
        var result: [String: String] = [:]
        var item = list
        while let current = item {
            var key: UnsafeMutablePointer<CChar>? = nil
            var value: UnsafeMutablePointer<CChar>? = nil
            if avahi_string_list_get_pair(current, &key, &value, nil) == 0, let key {
                result[String(cString: key)] = value.map { String(cString: $0) } ?? ""
                avahi_free(key)
                if let value { avahi_free(value) }
            }
            item = avahi_string_list_get_next(current)
        }
        return result
    }
}
