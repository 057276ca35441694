export function countWords(text) {
  const words = text.split(/\s+/).filter(Boolean);
  const counts = new Map();
  for (const word of words) {
    counts.set(word, (counts.get(word) ?? 0) + 1);
  }
  return counts;
}

export function longest(text) {
  if (!text.trim()) {
    return null;
  }
  return text.split(/\s+/).reduce((a, b) => (b.length > a.length ? b : a));
}
