// The PartyCast remote: renders every snapshot the party pushes over /api/events and sends each
// control to the JSON API. Text from the party (titles, names) goes in with textContent only.
// A private party's key stays in this tab: the page proves it with SPAKE2 (spake2.js) for a
// session token, and sends only that.
"use strict";

const $ = (selector, root = document) => root.querySelector(selector);
const keyStorage = "partycast-key";
let token = null;             // the session token a key handshake earned, for Authorization: Bearer
let session = null;           // the handshake under way, which every request that needs a token awaits
let snapshot = null;
let receivedAt = 0;           // performance.now() when `snapshot` arrived, to advance the position locally
let seeking = false;          // the user holds the seek bar: don't move it under their finger
let socket = null;
let retryDelay = 500;
let live = false;             // the push channel is open: the party answers
let offlineSince = 0;         // performance.now() when it stopped answering, to stop the clock there
const covers = new Map();     // "item id:cover revision" → object URL of its picture

function partyKey() { return sessionStorage.getItem(keyStorage); }

function showError(message) {
  const box = $("#error");
  box.textContent = message;
  box.hidden = false;
  clearTimeout(showError.timer);
  showError.timer = setTimeout(() => { box.hidden = true; }, 5000);
}

function askForKey(message) {
  if (socket) { socket.onclose = null; socket.close(); socket = null; }
  sessionStorage.removeItem(keyStorage);
  token = null;
  $("#key-form").hidden = false;
  $("#key").focus();
  if (message) showError(message);
}

const base64 = (bytes) => btoa(String.fromCharCode(...bytes));
const unbase64 = (text) => Array.from(atob(text), (character) => character.charCodeAt(0));

async function post(path, body) {
  const response = await fetch("/api/" + path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  return { response, answer: await response.json().catch(() => null) };
}

// SPAKE2 as the remote (role A): the broadcaster must prove the key before this side confirms;
// then its token. True once there is a token; otherwise the page has said why.
async function openSession(key) {
  try {
    spake2.load();
  } catch (error) {
    showError("this page cannot prove the key (" + error.message + "): the broadcaster needs Debian's node-elliptic; broadcaster ctl works without");
    return false;
  }
  const remote = spake2.remote(key);
  const sessionID = base64(crypto.getRandomValues(new Uint8Array(16)));
  try {
    const start = await post("session", { sessionID, share: base64(remote.share) });
    if (!start.response.ok) { showError((start.answer && start.answer.error) || start.response.statusText); return false; }
    const confirmations = remote.finish(unbase64(start.answer.share));
    if (!confirmations || !spake2.same(confirmations.expected, unbase64(start.answer.confirmation))) {
      askForKey("wrong party key (or this is not the party's broadcaster)");
      return false;
    }
    const confirm = await post("session/confirm", { sessionID, confirmation: base64(confirmations.own) });
    if (!confirm.response.ok) { showError((confirm.answer && confirm.answer.error) || confirm.response.statusText); return false; }
    token = confirm.answer.token;
    return true;
  } catch (error) {
    showError("the broadcaster does not answer: " + error.message);
    return false;
  }
}

// One handshake at a time, however many requests found their token missing or expired.
function ensureSession() {
  if (!session) session = openSession(partyKey()).finally(() => { session = null; });
  return session;
}

function authorization() { return token ? { Authorization: "Bearer " + token } : {}; }

async function api(method, path, body, renewed) {
  const headers = authorization();
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch("/api/" + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (error) {
    showError("the broadcaster does not answer: " + error.message);
    return null;
  }
  if (response.status === 401) {
    if (!partyKey()) { askForKey("the party key is needed"); return null; }
    return !renewed && await ensureSession() ? api(method, path, body, true) : null;
  }
  const answer = await response.json().catch(() => null);
  if (!response.ok) { showError((answer && answer.error) || response.statusText); return null; }
  return answer;
}

// A command answers with the new snapshot; show it at once rather than wait for the push.
async function command(method, path, body) {
  const answer = await api(method, path, body);
  if (answer && typeof answer.revision === "number") render(answer);
}

// A slider sends many values while it moves: one request per target at a time, and only the
// newest value once that answers, so the party ends where the slider did, in order.
const inFlight = new Map();   // path → the newest waiting {method, body}, or null
async function latest(method, path, body) {
  if (inFlight.has(path)) { inFlight.set(path, { method, body }); return; }
  inFlight.set(path, null);
  await command(method, path, body);
  const waiting = inFlight.get(path);
  inFlight.delete(path);
  if (waiting) latest(waiting.method, path, waiting.body);
}

function clock(seconds) {
  if (!Number.isFinite(seconds) || seconds < 0) return "--:--";
  const total = Math.floor(seconds);
  const m = Math.floor(total / 60), s = total % 60;
  return String(m).padStart(2, "0") + ":" + String(s).padStart(2, "0");
}

function currentItem() {
  if (!snapshot || snapshot.current == null) return null;
  return snapshot.queue.find((item) => item.id === snapshot.current) || null;
}

function elapsedNow() {
  if (!snapshot) return 0;
  const item = currentItem();
  let elapsed = snapshot.elapsedSeconds;
  const until = live ? performance.now() : Math.max(offlineSince, receivedAt);
  if (!snapshot.paused && !snapshot.ended && item) elapsed += (until - receivedAt) / 1000;
  const duration = item && item.durationSeconds;
  return duration ? Math.min(elapsed, duration) : elapsed;
}

function tick() {
  if (snapshot && !seeking) {
    const elapsed = elapsedNow();
    $("#elapsed").textContent = clock(elapsed);
    $("#seek").value = elapsed;
  }
  requestAnimationFrame(tick);
}

// Never overwrite what the user is changing right now.
function setValue(input, value) {
  if (document.activeElement !== input && String(input.value) !== String(value)) input.value = value;
}

async function showCover(item) {
  const image = $("#cover");
  if (!item || !item.hasCover) { image.hidden = true; image.removeAttribute("src"); return; }
  const key = item.id + ":" + item.coverRevision;
  if (!covers.has(key)) {
    // Fetched rather than linked: an <img> cannot send a private party's token.
    const response = await fetch("/api/items/" + item.id + "/cover?rev=" + item.coverRevision, { headers: authorization() }).catch(() => null);
    if (!response || !response.ok) { image.hidden = true; return; }
    covers.set(key, URL.createObjectURL(await response.blob()));
  }
  if (currentItem() && currentItem().id === item.id) {
    image.src = covers.get(key);
    image.alt = "Cover of " + item.title;
    image.hidden = false;
  }
}

function render(next) {
  if (snapshot && next.revision < snapshot.revision) return;  // an older answer overtaken by a push
  snapshot = next;
  receivedAt = performance.now();
  $("#party-name").textContent = next.name || "PartyCast";
  document.title = (next.name || "PartyCast") + " — remote";

  const item = currentItem();
  $("#title").textContent = item ? item.title : (next.ended ? "The party is over" : "Nothing playing");
  $("#artist").textContent = (item && item.artist) || "";
  $("#album").textContent = (item && item.album) || "";
  const duration = item && item.durationSeconds ? item.durationSeconds : 0;
  $("#seek").max = duration;
  $("#seek").disabled = !duration;
  $("#duration").textContent = duration ? clock(duration) : "--:--";
  $("#pause").hidden = next.paused;
  $("#resume").hidden = !next.paused;
  document.body.classList.toggle("paused", next.paused);
  setValue($("#party-volume"), next.volume);
  $("#party-volume-value").textContent = next.volume;
  $("#tone-control").hidden = next.toneHertz == null;
  if (next.toneHertz != null) {
    setValue($("#tone"), toneSlider(next.toneHertz));
    if (document.activeElement !== $("#tone")) $("#tone-value").textContent = hertzText(next.toneHertz);
  }
  showCover(item);

  renderQueue(next);
  renderListeners(next);
}

function renderQueue(next) {
  const list = $("#queue");
  list.replaceChildren();
  const currentIndex = next.queue.findIndex((item) => item.id === next.current);
  next.queue.forEach((item, index) => {
    const row = $("#queue-item").content.firstElementChild.cloneNode(true);
    row.dataset.id = item.id;
    row.dataset.testid = "queue-item-" + item.id;
    row.classList.toggle("current", item.id === next.current);
    row.classList.toggle("played", currentIndex >= 0 && index < currentIndex);
    $(".title", row).textContent = item.title;
    $(".artist", row).textContent = item.artist || "";
    $(".duration", row).textContent = item.durationSeconds ? clock(item.durationSeconds) : "";
    $(".play", row).onclick = () => command("POST", "queue/" + item.id + "/play");
    $(".up", row).disabled = index === 0;
    $(".up", row).onclick = () => command("POST", "queue/" + item.id + "/move", { index: index - 1 });
    $(".down", row).disabled = index === next.queue.length - 1;
    $(".down", row).onclick = () => command("POST", "queue/" + item.id + "/move", { index: index + 1 });
    $(".remove", row).onclick = () => command("DELETE", "queue/" + item.id);
    list.append(row);
  });
}

function renderListeners(next) {
  const box = $("#listeners");
  $("#no-listeners").hidden = next.listeners.length > 0;
  const present = new Set(next.listeners.map((listener) => listener.id));
  for (const row of [...box.children]) if (!present.has(row.dataset.id)) row.remove();
  for (const listener of next.listeners) {
    let row = [...box.children].find((element) => element.dataset.id === listener.id);
    if (!row) {
      row = $("#listener").content.firstElementChild.cloneNode(true);
      row.dataset.id = listener.id;
      row.dataset.testid = "listener-" + listener.id;
      const path = "listeners/" + encodeURIComponent(listener.id);
      $(".volume", row).addEventListener("input", (event) => { $(".volume-value", row).textContent = event.target.value; });
      $(".volume", row).addEventListener("change", (event) => latest("PUT", path + "/volume", { percent: Number(event.target.value) }));
      $(".mute", row).addEventListener("click", (event) =>
        command("PUT", path + "/mute", { muted: event.currentTarget.getAttribute("aria-pressed") !== "true" }));
      $(".latency", row).addEventListener("change", (event) =>
        command("PUT", path + "/latency-offset", { milliseconds: Math.round(Number(event.target.value)) }));
      $(".channel", row).addEventListener("change", (event) => command("PUT", path + "/channel", { channel: event.target.value }));
      $(".identify", row).addEventListener("click", () => command("POST", path + "/identify"));
      box.append(row);
    }
    $(".name", row).textContent = listener.name;
    $(".host", row).textContent = listener.host + " (" + listener.address + ")";
    setValue($(".volume", row), listener.volume);
    if (document.activeElement !== $(".volume", row)) $(".volume-value", row).textContent = listener.volume;
    $(".mute", row).setAttribute("aria-pressed", String(listener.muted));
    $(".mute", row).textContent = listener.muted ? "Unmute" : "Mute";
    setValue($(".latency", row), listener.latencyOffsetMilliseconds);
    setValue($(".channel", row), listener.channel);
    $(".buffer", row).textContent = listener.bufferMilliseconds == null ? "–" : listener.bufferMilliseconds + " ms";
    $(".sync", row).textContent = listener.syncErrorMicroseconds == null ? "–" : (listener.syncErrorMicroseconds / 1000).toFixed(1) + " ms";
    const bound = listener.clockBoundMicroseconds == null ? "" : "±" + listener.clockBoundMicroseconds + " µs";
    const settling = listener.clockSettled === false ? "settling" : "";
    $(".clock", row).textContent = [bound, settling].filter((part) => part).join(" ") || "–";
  }
}

// Each file by its title and artist, its path beneath and as the tooltip; one without tags by its
// file name. Loaded again whenever the panel opens: the broadcaster reads the tags in the background.
async function loadLibrary() {
  const files = await api("GET", "library");
  if (!Array.isArray(files)) return;
  const list = $("#library");
  list.replaceChildren();
  for (const file of files) {
    const row = $("#library-item").content.firstElementChild.cloneNode(true);
    row.title = file.path;
    row.dataset.path = file.path;
    row.dataset.search = [file.title, file.artist, file.path].filter(Boolean).join(" ").toLowerCase();
    $(".title", row).textContent = file.title || file.path.split("/").pop();
    $(".artist", row).textContent = file.artist || "";
    $(".path", row).textContent = file.path;
    $(".add", row).onclick = () => command("POST", "queue", { path: file.path });
    list.append(row);
  }
  filterLibrary();
}

function filterLibrary() {
  const words = $("#library-filter").value.toLowerCase();
  for (const row of $("#library").children) row.hidden = !row.dataset.search.includes(words);
}

// Every control works only while the party answers: disabled (one fieldset) from the moment its
// push channel closes. A reconnection that fails means the broadcaster is gone: the party has ended.
function setLive(answering, gone) {
  if (live && !answering) offlineSince = performance.now();
  live = answering;
  $("#controls").disabled = !answering;
  $("#ended").hidden = answering || !gone;
  $("#connection").textContent = answering ? "live" : (gone ? "party ended" : "reconnecting…");
  $("#connection").className = answering ? "online" : "offline";
}

function connect() {
  const scheme = location.protocol === "https:" ? "wss://" : "ws://";
  const ws = new WebSocket(scheme + location.host + "/api/events");
  let opened = false;
  socket = ws;
  ws.onopen = () => {
    opened = true;
    if (token) ws.send(JSON.stringify({ token }));
  };
  ws.onmessage = (event) => {
    retryDelay = 500;
    setLive(true, false);
    render(JSON.parse(event.data));
  };
  ws.onclose = (event) => {
    if (socket !== ws) return;
    socket = null;
    // 1001: the server is going away. Retrying goes on, should a service start it again.
    setLive(false, !opened || event.code === 1001);
    // 1008: no token, or an expired one: a new handshake with the key this tab holds, if it does.
    if (event.code === 1008) {
      token = null;
      if (!partyKey()) { askForKey(event.reason || "the party key is needed"); return; }
      ensureSession().then((renewed) => { if (renewed || partyKey()) setTimeout(connect, renewed ? 0 : retryDelay); });
      return;
    }
    setTimeout(connect, retryDelay);
    retryDelay = Math.min(retryDelay * 2, 5000);
  };
}

// Asks once whether the party is private (401) before opening the push channel.
async function start() {
  const status = await api("GET", "status");
  if (!status) return;
  $("#key-form").hidden = true;
  render(status);
  loadLibrary();
  connect();
}

$("#key-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  sessionStorage.setItem(keyStorage, $("#key").value);
  $("#key").value = "";
  $("#error").hidden = true;
  if (await ensureSession()) start();
});
$("#pause").onclick = () => command("POST", "pause");
$("#resume").onclick = () => command("POST", "resume");
$("#next").onclick = () => command("POST", "next");
$("#previous").onclick = () => command("POST", "previous");
$("#seek").addEventListener("pointerdown", () => { seeking = true; });
$("#seek").addEventListener("input", (event) => { seeking = true; $("#elapsed").textContent = clock(Number(event.target.value)); });
$("#seek").addEventListener("change", async (event) => {
  await latest("POST", "seek", { seconds: Number(event.target.value) });
  seeking = false;
});
// The tone's slider runs from 20 Hz to 20 kHz on a logarithmic scale, as an ear hears pitch.
function toneHertz(slider) { return Math.round(20 * Math.pow(1000, slider / 1000)); }
function toneSlider(hertz) { return Math.round(1000 * Math.log(Math.min(20000, Math.max(20, hertz)) / 20) / Math.log(1000)); }
function hertzText(hertz) { return hertz >= 1000 ? (hertz / 1000).toFixed(2) + " kHz" : Math.round(hertz) + " Hz"; }
$("#tone").addEventListener("input", (event) => { $("#tone-value").textContent = hertzText(toneHertz(Number(event.target.value))); });
$("#tone").addEventListener("change", (event) => latest("PUT", "tone", { hertz: toneHertz(Number(event.target.value)) }));
$("#party-volume").addEventListener("input", (event) => { $("#party-volume-value").textContent = event.target.value; });
$("#party-volume").addEventListener("change", (event) => latest("PUT", "volume", { percent: Number(event.target.value) }));
$("#library-filter").addEventListener("input", filterLibrary);
$("#library-panel").addEventListener("toggle", () => { if ($("#library-panel").open) loadLibrary(); });
$("#cover").addEventListener("error", () => { $("#cover").hidden = true; });

requestAnimationFrame(tick);
start();
