// /api/docs: execute's request-body examples are keyed by hook name; choosing one also sets the path's
// `hook`, or "Try it out" sent userMessageInbound's context to systemPrompt (a 400). Runs after
// drf-spectacular's script has made `ui` (a global binding of that classic script).
"use strict";
(() => {
  const PATH = "/api/v1/hooks/{hook}/execute";
  const ACTIVE = ["oas3", "examples", PATH, "post", "requestBody", "requestBody", "activeExample"];
  let followed;
  ui.getStore().subscribe(() => {
    const chosen = ui.getState().getIn(ACTIVE);
    if (!chosen || chosen === followed) return;
    followed = chosen;
    ui.specActions.changeParam([PATH, "post"], "hook", "path", chosen);
  });
})();
