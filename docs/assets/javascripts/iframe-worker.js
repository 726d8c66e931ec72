/* A Worker for pages opened from the file system (file://), where browsers refuse `new Worker`.
 *
 * Material's search runs in a web worker. Its offline plugin would load a shim for file:// from a
 * CDN; this site is built to need no network, so this local one takes its place: the worker's
 * script runs in a hidden same-origin iframe, whose `postMessage` and "message" events are
 * bridged to the object the page holds. Served over http(s), the browser's own Worker is used.
 */
(function () {
  "use strict";
  if (location.protocol !== "file:") return;

  class IframeWorker extends EventTarget {
    constructor(url) {
      super();
      this.onmessage = null;
      this.pending = [];
      this.frame = document.createElement("iframe");
      this.frame.style.display = "none";
      this.frame.srcdoc = "<!doctype html><title>worker</title>";
      this.frame.addEventListener("load", () => this.start(new URL(url, location.href).href), { once: true });
      (document.body || document.documentElement).appendChild(this.frame);
    }

    start(src) {
      const scope = this.frame.contentWindow;
      // The worker's replies: from its global postMessage to this object's "message" listeners.
      scope.postMessage = (data) => {
        const event = new MessageEvent("message", { data });
        if (typeof this.onmessage === "function") this.onmessage(event);
        this.dispatchEvent(event);
      };
      scope.importScripts = (...urls) => {
        for (const href of urls) {
          const request = new scope.XMLHttpRequest();
          request.open("GET", new URL(href, src).href, false);
          request.send();
          scope.eval(request.responseText);
        }
      };
      const script = scope.document.createElement("script");
      script.src = src;
      script.addEventListener("load", () => {
        this.scope = scope;
        for (const data of this.pending.splice(0)) this.deliver(data);
      });
      scope.document.head.appendChild(script);
    }

    deliver(data) {
      this.scope.dispatchEvent(new this.scope.MessageEvent("message", { data }));
    }

    postMessage(data) {
      if (this.scope) this.deliver(data);
      else this.pending.push(data);
    }

    terminate() {
      this.frame.remove();
    }
  }

  window.Worker = IframeWorker;
})();
