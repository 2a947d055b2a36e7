import CALSA
import PartyCastCore
#if canImport(Glibc)
import Glibc
#endif

/// `--mixer`: where a listener applies the volume the party sends it.
public enum MixerChoice: Sendable, Equatable {
    /// In the samples (the renderer's gain).
    case software
    /// On a playback volume control of the output's card: the named one, or the first there is.
    case hardware(control: String?)
    /// Nowhere: the samples at full scale, for an amplifier with its own volume knob.
    case none

    public static let names = "software|hardware[:CONTROL]|none"

    public init(parsing text: String) throws(PartyCastError) {
        switch text {
        case "software": self = .software
        case "none": self = .none
        case "hardware": self = .hardware(control: nil)
        case _ where text.hasPrefix("hardware:") && text.count > "hardware:".count: self = .hardware(control: String(text.dropFirst("hardware:".count)))
        default: throw PartyCastError(.invalidArgument, "--mixer takes \(Self.names), not '\(text)'")
        }
    }
}

/// A playback volume control of an ALSA card's simple mixer (`--mixer hardware[:CONTROL]`): the
/// volume is set there, so the samples reach the card at full scale and keep their resolution.
/// In dB when the control says what its steps are in dB, else linearly over its raw range.
public final class ALSAMixer: @unchecked Sendable {
    // @unchecked: alsa-lib's mixer handle, used by one thread at a time: opened at start, then set
    // by the player's producer thread only.
    private let alsa: PartyCastALSAFunctions
    private let mixer: OpaquePointer
    private let element: OpaquePointer
    /// The control's name as `amixer` shows it, and the ctl it is on (`hw:N`, or a plugin's: pulse).
    public let control: String
    public let ctl: String
    /// The control's range in hundredths of a dB; nil when it has no dB scale.
    private let decibels: ClosedRange<Int>?
    private let raw: ClosedRange<Int>
    private let hasSwitch: Bool
    private var lastGain: Float?

    private init(alsa: PartyCastALSAFunctions, mixer: OpaquePointer, element: OpaquePointer, control: String, ctl: String) {
        (self.alsa, self.mixer, self.element, self.control, self.ctl) = (alsa, mixer, element, control, ctl)
        var (low, high) = (0, 0)
        decibels = alsa.snd_mixer_selem_get_playback_dB_range(element, &low, &high) >= 0 && low < high ? low...high : nil
        // A playback volume control has a raw range; should alsa-lib not say it, 0…0 sets nothing amiss.
        (low, high) = (0, 0)
        raw = alsa.snd_mixer_selem_get_playback_volume_range(element, &low, &high) >= 0 && low <= high ? low...high : 0...0
        hasSwitch = alsa.snd_mixer_selem_has_playback_switch(element) != 0
    }

    deinit { _ = alsa.snd_mixer_close(mixer) }

    /// The control `wanted` (or the first playback volume control) of the card ALSA device `device` plays on.
    public static func open(device: String, control wanted: String?) throws(PartyCastError) -> ALSAMixer {
        var alsa = try alsaLibrary.get()
        partycast_alsa_silence_library_messages(&alsa)
        let ctl = try ctlName(of: device, alsa)
        var handle: OpaquePointer?
        guard alsa.snd_mixer_open(&handle, 0) >= 0, let mixer = handle else { throw PartyCastError(.output, "cannot open an ALSA mixer") }
        func check(_ result: Int32, _ what: String) throws(PartyCastError) {
            guard result < 0 else { return }
            _ = alsa.snd_mixer_close(mixer)
            throw PartyCastError(.output, "ALSA device '\(device)': cannot \(what) the mixer of '\(ctl)': \(ALSAPCM.message(result, alsa)); use --mixer software")
        }
        try check(alsa.snd_mixer_attach(mixer, ctl), "attach")
        try check(alsa.snd_mixer_selem_register(mixer, nil, nil), "register")
        try check(alsa.snd_mixer_load(mixer), "load")
        var controls: [(name: String, element: OpaquePointer)] = []
        var next = alsa.snd_mixer_first_elem(mixer)
        while let element = next {
            next = alsa.snd_mixer_elem_next(element)
            guard alsa.snd_mixer_selem_is_active(element) != 0, alsa.snd_mixer_selem_has_playback_volume(element) != 0,
                  let name = alsa.snd_mixer_selem_get_name(element) else { continue }
            let index = alsa.snd_mixer_selem_get_index(element)
            controls.append((index == 0 ? String(cString: name) : "\(String(cString: name)),\(index)", element))
        }
        guard let chosen = wanted.map({ wanted in controls.first { $0.name == wanted } }) ?? controls.first else {
            _ = alsa.snd_mixer_close(mixer)
            let names = controls.isEmpty ? "it has none" : "its controls: \(controls.map(\.name).joined(separator: ", "))"
            throw PartyCastError(.output, wanted.map { "ALSA device '\(device)' (mixer '\(ctl)') has no playback volume control '\($0)'; \(names)" }
                                 ?? "ALSA device '\(device)' (mixer '\(ctl)') has no playback volume control; use --mixer software")
        }
        return ALSAMixer(alsa: alsa, mixer: mixer, element: chosen.element, control: chosen.name, ctl: ctl)
    }

    /// The ctl of the card a PCM plays on: `hw:N`, or for a PCM on no card (a plugin such as pulse)
    /// the ctl of the PCM's own name, as alsa-lib's configuration pairs them.
    private static func ctlName(of device: String, _ alsa: PartyCastALSAFunctions) throws(PartyCastError) -> String {
        var handle: OpaquePointer?
        let opened = alsa.snd_pcm_open(&handle, device, SND_PCM_STREAM_PLAYBACK, SND_PCM_NONBLOCK)
        guard opened >= 0, let pcm = handle else {
            throw PartyCastError(.output, "cannot open ALSA device '\(device)': \(ALSAPCM.message(opened, alsa)); \(ALSAPCM.deviceChoices())")
        }
        defer { _ = alsa.snd_pcm_close(pcm) }
        var info: OpaquePointer?
        guard alsa.snd_pcm_info_malloc(&info) >= 0, let info else { throw PartyCastError(.output, "ALSA device '\(device)': out of memory") }
        defer { alsa.snd_pcm_info_free(info) }
        let card = alsa.snd_pcm_info(pcm, info) >= 0 ? alsa.snd_pcm_info_get_card(info) : -1
        return card >= 0 ? "hw:\(card)" : String(device.prefix { $0 != ":" })
    }

    /// Sets the control to `gain` (linear amplitude, 0 < gain ≤ 1; 1 is 0 dB or the top of a control
    /// without a dB scale) and turns its switch on. Nothing is sent when the gain did not change.
    public func set(gain: Float) throws(PartyCastError) {
        guard gain != lastGain else { return }
        let result: Int32
        if let decibels {
            let wanted = Int((2000 * log10(Double(max(gain, 1e-6)))).rounded())
            result = alsa.snd_mixer_selem_set_playback_dB_all(element, min(max(wanted, decibels.lowerBound), min(0, decibels.upperBound)), -1)
        } else {
            let span = Double(raw.upperBound - raw.lowerBound)
            result = alsa.snd_mixer_selem_set_playback_volume_all(element, raw.lowerBound + Int((Double(gain) * span).rounded()))
        }
        let switched = hasSwitch ? alsa.snd_mixer_selem_set_playback_switch_all(element, 1) : 0
        for failed in [result, switched] where failed < 0 {
            throw PartyCastError(.output, "ALSA mixer '\(ctl)': cannot set '\(control)': \(ALSAPCM.message(failed, alsa))")
        }
        lastGain = gain
    }
}
