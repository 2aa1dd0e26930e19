/**
 * The page's service worker (issue 39: the page as an installable app). It keeps the app shell of this build —
 * the page, its scripts, workers, style, manifest, icons and the server's params.json — in a cache named after
 * the build, so the page opens offline (keys viewable and exportable: they live in IndexedDB). Requests go to the
 * network first and fall back to the cache, so an online page always runs the server's current build; a new build
 * ships a new sw.js, which installs its own cache, takes over at once and deletes the caches of older builds.
 * Protocol calls (/v1/…) are outside its scope and never cached; face models are not cached.
 */
declare const __BUILD__: string;
const CACHE = `privface-app-${__BUILD__}`;
const SHELL = ["./", "index.html", "app.js", "style.css", "worker.js", "face-worker.js", "gsm.js", "gsm-keygen.js", "gsm-worker.js", "kiosk.html", "kiosk.js", "gsm-page.js", "pwa.js",
  "manifest.webmanifest", "icon-192.png", "icon-512.png", "params.json"];

interface SWScope {
  addEventListener(type: "install" | "activate", f: (e: { waitUntil(p: Promise<unknown>): void }) => void): void;
  addEventListener(type: "fetch", f: (e: { request: Request; respondWith(r: Promise<Response>): void }) => void): void;
  skipWaiting(): Promise<void>;
  clients: { claim(): Promise<void> };
  registration: { scope: string };
}
const sw = self as unknown as SWScope;

sw.addEventListener("install", (e) => {
  e.waitUntil((async () => {
    const cache = await caches.open(CACHE);
    // one by one: a missing optional asset (e.g. a build without the face pipeline) does not stop the others
    await Promise.all(SHELL.map((p) => cache.add(new Request(p, { cache: "no-store" })).catch(() => undefined)));
    await sw.skipWaiting();
  })());
});

sw.addEventListener("activate", (e) => {
  e.waitUntil((async () => {
    for (const name of await caches.keys()) {
      if (name.startsWith("privface-app-") && name !== CACHE) await caches.delete(name);
    }
    await sw.clients.claim();
  })());
});

sw.addEventListener("fetch", (e) => {
  const req = e.request;
  if (req.method !== "GET" || !req.url.startsWith(sw.registration.scope) || req.url.includes("/models/")) return;
  e.respondWith((async () => {
    try {
      const fresh = await fetch(req);
      if (fresh.ok && fresh.status === 200) {
        const path = new URL(req.url).pathname.split("/").pop() || "./";
        if (SHELL.includes(path) || req.mode === "navigate") await (await caches.open(CACHE)).put(req, fresh.clone());
      }
      return fresh;
    } catch {
      const cache = await caches.open(CACHE);
      const hit = (await cache.match(req, { ignoreSearch: true })) ?? (req.mode === "navigate" ? await cache.match("./") : undefined);
      if (hit) return hit;
      return new Response("offline, and this file is not cached", { status: 503, headers: { "content-type": "text/plain" } });
    }
  })());
});
