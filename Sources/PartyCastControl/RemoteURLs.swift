import NIOCore
import PartyCastCore

/// Where a phone finds the remote page. A bare host name ("vm") is often not resolvable from a
/// phone, so the URLs name this machine's LAN addresses first, then NAME.local, which mDNS resolves.
public enum RemoteURLs {
    /// The URLs of a remote control on `port` that listens on `bind`, for a machine called `hostName`
    /// with the LAN addresses `addresses`.
    public static func urls(port: Int, bind: String, hostName: String, addresses: [String]) -> [String] {
        guard bind == "0.0.0.0" || bind == "::" else { return [url(bind, port)] }
        let shortName = hostName.split(separator: ".").first.map(String.init) ?? hostName
        return addresses.map { url($0, port) } + [url(shortName + ".local", port)]
    }

    /// This machine's IPv4 addresses but loopback, each once, in the order of its interfaces.
    public static func lanAddresses() throws -> [String] {
        var addresses: [String] = []
        for device in try System.enumerateDevices() {
            guard case .v4? = device.address, let ip = device.address?.ipAddress, !ip.hasPrefix("127."), !addresses.contains(ip) else { continue }
            addresses.append(ip)
        }
        return addresses
    }

    private static func url(_ host: String, _ port: Int) -> String {
        "http://\(HostAndPort(host: host, port: port))/"
    }
}
