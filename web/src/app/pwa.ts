/** Registers the page's service worker (sw.ts): installable app, offline opening, clean updates on a new build. */
if ("serviceWorker" in navigator && isSecureContext) {
  navigator.serviceWorker.register("sw.js", { scope: "./", updateViaCache: "none" }).catch((e: unknown) => {
    console.warn("privface: the service worker did not register", e);
  });
}
export {};
