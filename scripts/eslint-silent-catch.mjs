// A local ESLint rule: `.catch(() => undefined)` (or `() => {}`) drops an error without a word.
// Each one either handles the error (logs it at the right level) or has a comment, on its lines
// or the line above, saying why nothing can be done. (`() => null` is left alone: it stands for
// "no value", which the caller then checks.) `catch {}` blocks are ESLint's `no-empty`, which
// wants a comment too.

/** Whether a handler's body does nothing with what it was given. */
function doesNothing(fn) {
  if (fn.type !== 'ArrowFunctionExpression' && fn.type !== 'FunctionExpression') return false;
  const b = fn.body;
  if (b.type === 'BlockStatement') return b.body.length === 0;
  if (b.type === 'Identifier') return b.name === 'undefined';
  return b.type === 'UnaryExpression' && b.operator === 'void' && b.argument.type === 'Literal';
}

export const noSilentCatch = {
  meta: {
    type: 'suggestion',
    docs: { description: 'a `.catch` that drops the error says why in a comment' },
    schema: [],
    messages: {
      silent: 'This .catch drops the error silently: log it, or say in a comment (on its lines or the line above) why nothing can be done.',
    },
  },
  create(context) {
    const source = context.sourceCode;
    const silentLine = /\.catch\(\(\) => (undefined|\{\s*\})\)/;
    // A comment on the call's lines or the line above; one above a run of such lines covers the run.
    const commented = (node) => {
      let first = node.loc.start.line;
      while (first > 1 && silentLine.test(source.lines[first - 2] ?? '')) first--;
      return source.getAllComments().some((c) => c.loc.end.line >= first - 1 && c.loc.start.line <= node.loc.end.line);
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
