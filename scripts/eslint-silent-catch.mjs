// A local ESLint rule: `.catch(() => undefined)` (or `() => {}`, `() => null`) drops an error
// without a word. Each one either handles the error (logs it at the right level, returns a
// value that says what happened) or has a comment, on its line or the line above, saying why
// nothing can be done. `catch {}` blocks are ESLint's `no-empty`, which wants a comment too.

/** Whether a handler's body does nothing with what it was given. */
function doesNothing(fn) {
  if (fn.type !== 'ArrowFunctionExpression' && fn.type !== 'FunctionExpression') return false;
  const b = fn.body;
  if (b.type === 'BlockStatement') return b.body.length === 0;
  if (b.type === 'Identifier') return b.name === 'undefined';
  if (b.type === 'Literal') return b.value === null;
  return b.type === 'UnaryExpression' && b.operator === 'void' && b.argument.type === 'Literal';
}

export const noSilentCatch = {
  meta: {
    type: 'suggestion',
    docs: { description: 'a `.catch` that drops the error says why in a comment' },
    schema: [],
    messages: { silent: 'This .catch drops the error silently: log it, or say in a comment (this line or the one above) why nothing can be done.' },
  },
  create(context) {
    const source = context.sourceCode;
    const commented = (node) => {
      const line = node.loc.start.line;
      const handlerLine = node.arguments[0].loc.start.line;
      return source.getAllComments().some((c) => c.loc.end.line >= line - 1 && c.loc.start.line <= Math.max(handlerLine, node.loc.end.line));
    };
    return {
      CallExpression(node) {
        const callee = node.callee;
        if (callee.type !== 'MemberExpression' || callee.computed || callee.property.name !== 'catch') return;
        const handler = node.arguments[0];
        if (!handler || !doesNothing(handler) || commented(node)) return;
        context.report({ node: handler, messageId: 'silent' });
      },
    };
  },
};
