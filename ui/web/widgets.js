// Pieces several views share: the operator's confirmation, polling, holders.
import {h, link, replace} from "./dom.js";

// Asks before an operator action; resolves true on "Yes". A native modal
// <dialog>: focus moves into it, Escape cancels.
export function confirmAction(question, detail, yes = "Yes") {
  return new Promise(resolve => {
    const dialog = h("dialog", {"aria-labelledby": "confirm-q", class: "confirm"},
      h("p", {id: "confirm-q"}, h("strong", {}, question)),
      detail ? h("p", {class: "help"}, detail) : null,
      h("form", {method: "dialog", class: "actions"},
        h("button", {value: "yes", class: "primary"}, yes),
        h("button", {value: "no", autofocus: true}, "Cancel")));
    dialog.addEventListener("close", () => { dialog.remove(); resolve(dialog.returnValue === "yes"); });
    document.body.append(dialog);
    dialog.showModal();
  });
}

// Runs `fn` now and every `ms` while the view is shown (and the tab is
// visible), keeping the keyboard focus where it was when `fn` re-renders.
export function poll(ctx, fn, ms) {
  let timer = null, stopped = false;
  const tick = async () => {
    if (stopped) return;
    if (!document.hidden) {
      const focused = document.activeElement && document.activeElement.dataset && document.activeElement.dataset.key;
      try {
        await fn();
        ctx.setStatus(`updated ${new Date().toLocaleTimeString()}`);
      } catch (e) {
        ctx.setStatus(`update failed: ${e.message}`);
      }
      if (focused && !stopped) {
        const again = ctx.main.querySelector(`[data-key="${CSS.escape(focused)}"]`);
        if (again) again.focus({preventScroll: true});
      }
    }
    if (!stopped) timer = setTimeout(tick, ms);
  };
  ctx.onCleanup(() => { stopped = true; clearTimeout(timer); ctx.setStatus(""); });
  return tick();
}

// Re-renders `el` only when `data` changed since the last time.
export function update(el, data, render) {
  const text = JSON.stringify(data);
  if (el.dataset.rendered === text) return;
  el.dataset.rendered = text;
  replace(el, render(data));
}

// "tvm/PR-12 #7 · hil" with the job linked to its URL when it is http(s).
export function holder(hd) {
  if (!hd) return "";
  const job = hd.job || hd.principal || "";
  const label = [job, hd.build ? `#${hd.build}` : ""].filter(Boolean).join(" ");
  return h("span", {class: "holder"}, hd.url ? link(hd.url, label) : label, hd.stage ? ` · ${hd.stage}` : "");
}

export function shortId(id) {
  return id && id.length > 12 ? id.slice(0, 8) + "…" : id;
}
