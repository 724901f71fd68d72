"""FTS5's `unicode61 remove_diacritics 2` tokenizer as tables: which code points separate words,
and how the others fold (case, diacritics). Read from SQLite itself: for every code point `c`, the
text `q<c>q` gives two tokens where `c` separates words, else one, holding `c` as FTS5 folds it
(tests/stores/test_pg_keywords.py reads them again from the SQLite at hand and compares).

Part of migration 4 (`ca_keyword_text`, the SQL fold of the database's fallback trigger): never
edit them; a change is a new migration.
"""

from __future__ import annotations

# Code points FTS5 separates words at (inclusive ranges).
SEPARATORS: tuple[tuple[int, int], ...] = (
    (0x0, 0x2f), (0x3a, 0x40), (0x5b, 0x60), (0x7b, 0xa9), (0xab, 0xb1), (0xb4, 0xb4), (0xb6, 0xb8), (0xbb, 0xbb),
    (0xbf, 0xbf), (0xd7, 0xd7), (0xf7, 0xf7), (0x2c2, 0x2c5), (0x2d2, 0x2df), (0x2e5, 0x2eb), (0x2ed, 0x2ed),
    (0x2ef, 0x2ff), (0x305, 0x305), (0x30d, 0x30e), (0x310, 0x310), (0x312, 0x31a), (0x31c, 0x322), (0x329, 0x32c),
    (0x32f, 0x32f), (0x332, 0x36f), (0x375, 0x375), (0x37e, 0x37e), (0x384, 0x385), (0x387, 0x387), (0x3f6, 0x3f6),
    (0x482, 0x489), (0x55a, 0x55f), (0x589, 0x58a), (0x58f, 0x58f), (0x591, 0x5c7), (0x5f3, 0x5f4), (0x600, 0x604),
    (0x606, 0x61b), (0x61e, 0x61f), (0x64b, 0x65f), (0x66a, 0x66d), (0x670, 0x670), (0x6d4, 0x6d4), (0x6d6, 0x6e4),
    (0x6e7, 0x6ed), (0x6fd, 0x6fe), (0x700, 0x70d), (0x70f, 0x70f), (0x711, 0x711), (0x730, 0x74a), (0x7a6, 0x7b0),
    (0x7eb, 0x7f3), (0x7f6, 0x7f9), (0x816, 0x819), (0x81b, 0x823), (0x825, 0x827), (0x829, 0x82d), (0x830, 0x83e),
    (0x859, 0x85b), (0x85e, 0x85e), (0x8e4, 0x8fe), (0x900, 0x903), (0x93a, 0x93c), (0x93e, 0x94f), (0x951, 0x957),
    (0x962, 0x965), (0x970, 0x970), (0x981, 0x983), (0x9bc, 0x9bc), (0x9be, 0x9c4), (0x9c7, 0x9c8), (0x9cb, 0x9cd),
    (0x9d7, 0x9d7), (0x9e2, 0x9e3), (0x9f2, 0x9f3), (0x9fa, 0x9fb), (0xa01, 0xa03), (0xa3c, 0xa3c), (0xa3e, 0xa42),
    (0xa47, 0xa48), (0xa4b, 0xa4d), (0xa51, 0xa51), (0xa70, 0xa71), (0xa75, 0xa75), (0xa81, 0xa83), (0xabc, 0xabc),
    (0xabe, 0xac5), (0xac7, 0xac9), (0xacb, 0xacd), (0xae2, 0xae3), (0xaf0, 0xaf1), (0xb01, 0xb03), (0xb3c, 0xb3c),
    (0xb3e, 0xb44), (0xb47, 0xb48), (0xb4b, 0xb4d), (0xb56, 0xb57), (0xb62, 0xb63), (0xb70, 0xb70), (0xb82, 0xb82),
    (0xbbe, 0xbc2), (0xbc6, 0xbc8), (0xbca, 0xbcd), (0xbd7, 0xbd7), (0xbf3, 0xbfa), (0xc01, 0xc03), (0xc3e, 0xc44),
    (0xc46, 0xc48), (0xc4a, 0xc4d), (0xc55, 0xc56), (0xc62, 0xc63), (0xc7f, 0xc7f), (0xc82, 0xc83), (0xcbc, 0xcbc),
    (0xcbe, 0xcc4), (0xcc6, 0xcc8), (0xcca, 0xccd), (0xcd5, 0xcd6), (0xce2, 0xce3), (0xd02, 0xd03), (0xd3e, 0xd44),
    (0xd46, 0xd48), (0xd4a, 0xd4d), (0xd57, 0xd57), (0xd62, 0xd63), (0xd79, 0xd79), (0xd82, 0xd83), (0xdca, 0xdca),
    (0xdcf, 0xdd4), (0xdd6, 0xdd6), (0xdd8, 0xddf), (0xdf2, 0xdf4), (0xe31, 0xe31), (0xe34, 0xe3a), (0xe3f, 0xe3f),
    (0xe47, 0xe4f), (0xe5a, 0xe5b), (0xeb1, 0xeb1), (0xeb4, 0xeb9), (0xebb, 0xebc), (0xec8, 0xecd), (0xf01, 0xf1f),
    (0xf34, 0xf3f), (0xf71, 0xf87), (0xf8d, 0xf97), (0xf99, 0xfbc), (0xfbe, 0xfcc), (0xfce, 0xfda), (0x102b, 0x103e),
    (0x104a, 0x104f), (0x1056, 0x1059), (0x105e, 0x1060), (0x1062, 0x1064), (0x1067, 0x106d), (0x1071, 0x1074),
    (0x1082, 0x108d), (0x108f, 0x108f), (0x109a, 0x109f), (0x10fb, 0x10fb), (0x135d, 0x1368), (0x1390, 0x1399),
    (0x1400, 0x1400), (0x166d, 0x166e), (0x1680, 0x1680), (0x169b, 0x169c), (0x16eb, 0x16ed), (0x1712, 0x1714),
    (0x1732, 0x1736), (0x1752, 0x1753), (0x1772, 0x1773), (0x17b4, 0x17d6), (0x17d8, 0x17db), (0x17dd, 0x17dd),
    (0x1800, 0x180e), (0x18a9, 0x18a9), (0x1920, 0x192b), (0x1930, 0x193b), (0x1940, 0x1940), (0x1944, 0x1945),
    (0x19b0, 0x19c0), (0x19c8, 0x19c9), (0x19de, 0x19ff), (0x1a17, 0x1a1b), (0x1a1e, 0x1a1f), (0x1a55, 0x1a5e),
    (0x1a60, 0x1a7c), (0x1a7f, 0x1a7f), (0x1aa0, 0x1aa6), (0x1aa8, 0x1aad), (0x1b00, 0x1b04), (0x1b34, 0x1b44),
    (0x1b5a, 0x1b7c), (0x1b80, 0x1b82), (0x1ba1, 0x1bad), (0x1be6, 0x1bf3), (0x1bfc, 0x1bff), (0x1c24, 0x1c37),
    (0x1c3b, 0x1c3f), (0x1c7e, 0x1c7f), (0x1cc0, 0x1cc7), (0x1cd0, 0x1ce8), (0x1ced, 0x1ced), (0x1cf2, 0x1cf4),
    (0x1dc0, 0x1de6), (0x1dfc, 0x1dff), (0x1fbd, 0x1fbd), (0x1fbf, 0x1fc1), (0x1fcd, 0x1fcf), (0x1fdd, 0x1fdf),
    (0x1fed, 0x1fef), (0x1ffd, 0x1ffe), (0x2000, 0x2064), (0x206a, 0x206f), (0x207a, 0x207e), (0x208a, 0x208e),
    (0x20a0, 0x20b9), (0x20d0, 0x20f0), (0x2100, 0x2101), (0x2103, 0x2106), (0x2108, 0x2109), (0x2114, 0x2114),
    (0x2116, 0x2118), (0x211e, 0x2123), (0x2125, 0x2125), (0x2127, 0x2127), (0x2129, 0x2129), (0x212e, 0x212e),
    (0x213a, 0x213b), (0x2140, 0x2144), (0x214a, 0x214d), (0x214f, 0x214f), (0x2190, 0x23f3), (0x2400, 0x2426),
    (0x2440, 0x244a), (0x249c, 0x24e9), (0x2500, 0x26ff), (0x2701, 0x2775), (0x2794, 0x2b4c), (0x2b50, 0x2b59),
    (0x2ce5, 0x2cea), (0x2cef, 0x2cf1), (0x2cf9, 0x2cfc), (0x2cfe, 0x2cff), (0x2d70, 0x2d70), (0x2d7f, 0x2d7f),
    (0x2de0, 0x2e2e), (0x2e30, 0x2e3b), (0x2e80, 0x2e99), (0x2e9b, 0x2ef3), (0x2f00, 0x2fd5), (0x2ff0, 0x2ffb),
    (0x3000, 0x3004), (0x3008, 0x3020), (0x302a, 0x3030), (0x3036, 0x3037), (0x303d, 0x303f), (0x3099, 0x309c),
    (0x30a0, 0x30a0), (0x30fb, 0x30fb), (0x3190, 0x3191), (0x3196, 0x319f), (0x31c0, 0x31e3), (0x3200, 0x321e),
    (0x322a, 0x3247), (0x3250, 0x3250), (0x3260, 0x327f), (0x328a, 0x32b0), (0x32c0, 0x32fe), (0x3300, 0x33ff),
    (0x4dc0, 0x4dff), (0xa490, 0xa4c6), (0xa4fe, 0xa4ff), (0xa60d, 0xa60f), (0xa66f, 0xa67e), (0xa69f, 0xa69f),
    (0xa6f0, 0xa6f7), (0xa700, 0xa716), (0xa720, 0xa721), (0xa789, 0xa78a), (0xa802, 0xa802), (0xa806, 0xa806),
    (0xa80b, 0xa80b), (0xa823, 0xa82b), (0xa836, 0xa839), (0xa874, 0xa877), (0xa880, 0xa881), (0xa8b4, 0xa8c4),
    (0xa8ce, 0xa8cf), (0xa8e0, 0xa8f1), (0xa8f8, 0xa8fa), (0xa926, 0xa92f), (0xa947, 0xa953), (0xa95f, 0xa95f),
    (0xa980, 0xa983), (0xa9b3, 0xa9cd), (0xa9de, 0xa9df), (0xaa29, 0xaa36), (0xaa43, 0xaa43), (0xaa4c, 0xaa4d),
    (0xaa5c, 0xaa5f), (0xaa77, 0xaa79), (0xaa7b, 0xaa7b), (0xaab0, 0xaab0), (0xaab2, 0xaab4), (0xaab7, 0xaab8),
    (0xaabe, 0xaabf), (0xaac1, 0xaac1), (0xaade, 0xaadf), (0xaaeb, 0xaaf1), (0xaaf5, 0xaaf6), (0xabe3, 0xabed),
    (0xfb1e, 0xfb1e), (0xfb29, 0xfb29), (0xfbb2, 0xfbc1), (0xfd3e, 0xfd3f), (0xfdfc, 0xfdfd), (0xfe00, 0xfe19),
    (0xfe20, 0xfe26), (0xfe30, 0xfe52), (0xfe54, 0xfe66), (0xfe68, 0xfe6b), (0xfeff, 0xfeff), (0xff01, 0xff0f),
    (0xff1a, 0xff20), (0xff3b, 0xff40), (0xff5b, 0xff65), (0xffe0, 0xffe6), (0xffe8, 0xffee), (0xfff9, 0xffff),
    (0x10100, 0x10102), (0x10137, 0x1013f), (0x10179, 0x10189), (0x10190, 0x1019b), (0x101d0, 0x101fd),
    (0x1039f, 0x1039f), (0x103d0, 0x103d0), (0x10857, 0x10857), (0x1091f, 0x1091f), (0x1093f, 0x1093f),
    (0x10a01, 0x10a03), (0x10a05, 0x10a06), (0x10a0c, 0x10a0f), (0x10a38, 0x10a3a), (0x10a3f, 0x10a3f),
    (0x10a50, 0x10a58), (0x10a7f, 0x10a7f), (0x10b39, 0x10b3f), (0x11000, 0x11002), (0x11038, 0x1104d),
    (0x11080, 0x11082), (0x110b0, 0x110c1), (0x11100, 0x11102), (0x11127, 0x11134), (0x11140, 0x11143),
    (0x11180, 0x11182), (0x111b3, 0x111c0), (0x111c5, 0x111c8), (0x116ab, 0x116b7), (0x12470, 0x12473),
    (0x16f51, 0x16f7e), (0x16f8f, 0x16f92), (0x1d000, 0x1d0f5), (0x1d100, 0x1d126), (0x1d129, 0x1d1dd),
    (0x1d200, 0x1d245), (0x1d300, 0x1d356), (0x1d6c1, 0x1d6c1), (0x1d6db, 0x1d6db), (0x1d6fb, 0x1d6fb),
    (0x1d715, 0x1d715), (0x1d735, 0x1d735), (0x1d74f, 0x1d74f), (0x1d76f, 0x1d76f), (0x1d789, 0x1d789),
    (0x1d7a9, 0x1d7a9), (0x1d7c3, 0x1d7c3), (0x1eef0, 0x1eef1), (0x1f000, 0x1f02b), (0x1f030, 0x1f093),
    (0x1f0a0, 0x1f0ae), (0x1f0b1, 0x1f0be), (0x1f0c1, 0x1f0cf), (0x1f0d1, 0x1f0df), (0x1f110, 0x1f12e),
    (0x1f130, 0x1f16b), (0x1f170, 0x1f19a), (0x1f1e6, 0x1f202), (0x1f210, 0x1f23a), (0x1f240, 0x1f248),
    (0x1f250, 0x1f251), (0x1f300, 0x1f320), (0x1f330, 0x1f335), (0x1f337, 0x1f37c), (0x1f380, 0x1f393),
    (0x1f3a0, 0x1f3c4), (0x1f3c6, 0x1f3ca), (0x1f3e0, 0x1f3f0), (0x1f400, 0x1f43e), (0x1f440, 0x1f440),
    (0x1f442, 0x1f4f7), (0x1f4f9, 0x1f4fc), (0x1f500, 0x1f53d), (0x1f540, 0x1f543), (0x1f550, 0x1f567),
    (0x1f5fb, 0x1f640), (0x1f645, 0x1f64f), (0x1f680, 0x1f6c5), (0x1f700, 0x1f773), (0xe0001, 0xe0001),
    (0xe0020, 0xe007f), (0xe0100, 0xe01ef),
)
# Non-ASCII code points FTS5 folds to another (A-Z fold to a-z), and what each folds to.
FOLDED = (
    "\u00b5\u00c0\u00c1\u00c2\u00c3\u00c4\u00c5\u00c6\u00c7\u00c8\u00c9\u00ca\u00cb\u00cc\u00cd\u00ce"
    "\u00cf\u00d0\u00d1\u00d2\u00d3\u00d4\u00d5\u00d6\u00d8\u00d9\u00da\u00db\u00dc\u00dd\u00de\u00e0"
    "\u00e1\u00e2\u00e3\u00e4\u00e5\u00e7\u00e8\u00e9\u00ea\u00eb\u00ec\u00ed\u00ee\u00ef\u00f1\u00f2"
    "\u00f3\u00f4\u00f5\u00f6\u00f9\u00fa\u00fb\u00fc\u00fd\u00ff\u0100\u0101\u0102\u0103\u0104\u0105"
    "\u0106\u0107\u0108\u0109\u010a\u010b\u010c\u010d\u010e\u010f\u0110\u0112\u0113\u0114\u0115\u0116"
    "\u0117\u0118\u0119\u011a\u011b\u011c\u011d\u011e\u011f\u0120\u0121\u0122\u0123\u0124\u0125\u0126"
    "\u0128\u0129\u012a\u012b\u012c\u012d\u012e\u012f\u0130\u0132\u0134\u0135\u0136\u0137\u0139\u013a"
    "\u013b\u013c\u013d\u013e\u013f\u0141\u0143\u0144\u0145\u0146\u0147\u0148\u014a\u014c\u014d\u014e"
    "\u014f\u0150\u0151\u0152\u0154\u0155\u0156\u0157\u0158\u0159\u015a\u015b\u015c\u015d\u015e\u015f"
    "\u0160\u0161\u0162\u0163\u0164\u0165\u0166\u0168\u0169\u016a\u016b\u016c\u016d\u016e\u016f\u0170"
    "\u0171\u0172\u0173\u0174\u0175\u0176\u0177\u0178\u0179\u017a\u017b\u017c\u017d\u017e\u017f\u0181"
    "\u0182\u0184\u0186\u0187\u0189\u018a\u018b\u018e\u018f\u0190\u0191\u0193\u0194\u0196\u0197\u0198"
    "\u019c\u019d\u019f\u01a0\u01a1\u01a2\u01a4\u01a6\u01a7\u01a9\u01ac\u01ae\u01af\u01b0\u01b1\u01b2"
    "\u01b3\u01b5\u01b7\u01b8\u01bc\u01c4\u01c5\u01c7\u01c8\u01ca\u01cb\u01cd\u01ce\u01cf\u01d0\u01d1"
    "\u01d2\u01d3\u01d4\u01d5\u01d6\u01d7\u01d8\u01d9\u01da\u01db\u01dc\u01de\u01df\u01e0\u01e2\u01e4"
    "\u01e6\u01e7\u01e8\u01e9\u01ea\u01eb\u01ec\u01ed\u01ee\u01f0\u01f1\u01f2\u01f4\u01f5\u01f6\u01f7"
    "\u01f8\u01f9\u01fa\u01fb\u01fc\u01fe\u0200\u0201\u0202\u0203\u0204\u0205\u0206\u0207\u0208\u0209"
    "\u020a\u020b\u020c\u020d\u020e\u020f\u0210\u0211\u0212\u0213\u0214\u0215\u0216\u0217\u0218\u0219"
    "\u021a\u021b\u021c\u021e\u021f\u0220\u0222\u0224\u0226\u0227\u0228\u0229\u022a\u022b\u022c\u022d"
    "\u022e\u022f\u0230\u0231\u0232\u0233\u023a\u023b\u023d\u023e\u0241\u0243\u0244\u0245\u0246\u0248"
    "\u024a\u024c\u024e\u0370\u0372\u0376\u0386\u0388\u0389\u038a\u038c\u038e\u038f\u0391\u0392\u0393"
    "\u0394\u0395\u0396\u0397\u0398\u0399\u039a\u039b\u039c\u039d\u039e\u039f\u03a0\u03a1\u03a3\u03a4"
    "\u03a5\u03a6\u03a7\u03a8\u03a9\u03aa\u03ab\u03c2\u03cf\u03d0\u03d1\u03d5\u03d6\u03d8\u03da\u03dc"
    "\u03de\u03e0\u03e2\u03e4\u03e6\u03e8\u03ea\u03ec\u03ee\u03f0\u03f1\u03f4\u03f5\u03f7\u03f9\u03fa"
    "\u03fd\u03fe\u03ff\u0400\u0401\u0402\u0403\u0404\u0405\u0406\u0407\u0408\u0409\u040a\u040b\u040c"
    "\u040d\u040e\u040f\u0410\u0411\u0412\u0413\u0414\u0415\u0416\u0417\u0418\u0419\u041a\u041b\u041c"
    "\u041d\u041e\u041f\u0420\u0421\u0422\u0423\u0424\u0425\u0426\u0427\u0428\u0429\u042a\u042b\u042c"
    "\u042d\u042e\u042f\u0460\u0462\u0464\u0466\u0468\u046a\u046c\u046e\u0470\u0472\u0474\u0476\u0478"
    "\u047a\u047c\u047e\u0480\u048a\u048c\u048e\u0490\u0492\u0494\u0496\u0498\u049a\u049c\u049e\u04a0"
    "\u04a2\u04a4\u04a6\u04a8\u04aa\u04ac\u04ae\u04b0\u04b2\u04b4\u04b6\u04b8\u04ba\u04bc\u04be\u04c0"
    "\u04c1\u04c3\u04c5\u04c7\u04c9\u04cb\u04cd\u04d0\u04d2\u04d4\u04d6\u04d8\u04da\u04dc\u04de\u04e0"
    "\u04e2\u04e4\u04e6\u04e8\u04ea\u04ec\u04ee\u04f0\u04f2\u04f4\u04f6\u04f8\u04fa\u04fc\u04fe\u0500"
    "\u0502\u0504\u0506\u0508\u050a\u050c\u050e\u0510\u0512\u0514\u0516\u0518\u051a\u051c\u051e\u0520"
    "\u0522\u0524\u0526\u0531\u0532\u0533\u0534\u0535\u0536\u0537\u0538\u0539\u053a\u053b\u053c\u053d"
    "\u053e\u053f\u0540\u0541\u0542\u0543\u0544\u0545\u0546\u0547\u0548\u0549\u054a\u054b\u054c\u054d"
    "\u054e\u054f\u0550\u0551\u0552\u0553\u0554\u0555\u0556\u10a0\u10a1\u10a2\u10a3\u10a4\u10a5\u10a6"
    "\u10a7\u10a8\u10a9\u10aa\u10ab\u10ac\u10ad\u10ae\u10af\u10b0\u10b1\u10b2\u10b3\u10b4\u10b5\u10b6"
    "\u10b7\u10b8\u10b9\u10ba\u10bb\u10bc\u10bd\u10be\u10bf\u10c0\u10c1\u10c2\u10c3\u10c4\u10c5\u10c7"
    "\u10cd\u1e00\u1e01\u1e02\u1e03\u1e04\u1e05\u1e06\u1e07\u1e08\u1e09\u1e0a\u1e0b\u1e0c\u1e0d\u1e0e"
    "\u1e0f\u1e10\u1e11\u1e12\u1e13\u1e14\u1e15\u1e16\u1e17\u1e18\u1e19\u1e1a\u1e1b\u1e1c\u1e1d\u1e1e"
    "\u1e1f\u1e20\u1e21\u1e22\u1e23\u1e24\u1e25\u1e26\u1e27\u1e28\u1e29\u1e2a\u1e2b\u1e2c\u1e2d\u1e2e"
    "\u1e2f\u1e30\u1e31\u1e32\u1e33\u1e34\u1e35\u1e36\u1e37\u1e38\u1e39\u1e3a\u1e3b\u1e3c\u1e3d\u1e3e"
    "\u1e3f\u1e40\u1e41\u1e42\u1e43\u1e44\u1e45\u1e46\u1e47\u1e48\u1e49\u1e4a\u1e4b\u1e4c\u1e4d\u1e4e"
    "\u1e4f\u1e50\u1e51\u1e52\u1e53\u1e54\u1e55\u1e56\u1e57\u1e58\u1e59\u1e5a\u1e5b\u1e5c\u1e5d\u1e5e"
    "\u1e5f\u1e60\u1e61\u1e62\u1e63\u1e64\u1e65\u1e66\u1e67\u1e68\u1e69\u1e6a\u1e6b\u1e6c\u1e6d\u1e6e"
    "\u1e6f\u1e70\u1e71\u1e72\u1e73\u1e74\u1e75\u1e76\u1e77\u1e78\u1e79\u1e7a\u1e7b\u1e7c\u1e7d\u1e7e"
    "\u1e7f\u1e80\u1e81\u1e82\u1e83\u1e84\u1e85\u1e86\u1e87\u1e88\u1e89\u1e8a\u1e8b\u1e8c\u1e8d\u1e8e"
    "\u1e8f\u1e90\u1e91\u1e92\u1e93\u1e94\u1e95\u1e96\u1e97\u1e98\u1e99\u1e9b\u1e9e\u1ea0\u1ea1\u1ea2"
    "\u1ea3\u1ea4\u1ea5\u1ea6\u1ea7\u1ea8\u1ea9\u1eaa\u1eab\u1eac\u1ead\u1eae\u1eaf\u1eb0\u1eb1\u1eb2"
    "\u1eb3\u1eb4\u1eb5\u1eb6\u1eb7\u1eb8\u1eb9\u1eba\u1ebb\u1ebc\u1ebd\u1ebe\u1ebf\u1ec0\u1ec1\u1ec2"
    "\u1ec3\u1ec4\u1ec5\u1ec6\u1ec7\u1ec8\u1ec9\u1eca\u1ecb\u1ecc\u1ecd\u1ece\u1ecf\u1ed0\u1ed1\u1ed2"
    "\u1ed3\u1ed4\u1ed5\u1ed6\u1ed7\u1ed8\u1ed9\u1eda\u1edb\u1edc\u1edd\u1ede\u1edf\u1ee0\u1ee1\u1ee2"
    "\u1ee3\u1ee4\u1ee5\u1ee6\u1ee7\u1ee8\u1ee9\u1eea\u1eeb\u1eec\u1eed\u1eee\u1eef\u1ef0\u1ef1\u1ef2"
    "\u1ef3\u1ef4\u1ef5\u1ef6\u1ef7\u1ef8\u1ef9\u1efa\u1efc\u1efe\u1f08\u1f09\u1f0a\u1f0b\u1f0c\u1f0d"
    "\u1f0e\u1f0f\u1f18\u1f19\u1f1a\u1f1b\u1f1c\u1f1d\u1f28\u1f29\u1f2a\u1f2b\u1f2c\u1f2d\u1f2e\u1f2f"
    "\u1f38\u1f39\u1f3a\u1f3b\u1f3c\u1f3d\u1f3e\u1f3f\u1f48\u1f49\u1f4a\u1f4b\u1f4c\u1f4d\u1f59\u1f5b"
    "\u1f5d\u1f5f\u1f68\u1f69\u1f6a\u1f6b\u1f6c\u1f6d\u1f6e\u1f6f\u1f88\u1f89\u1f8a\u1f8b\u1f8c\u1f8d"
    "\u1f8e\u1f8f\u1f98\u1f99\u1f9a\u1f9b\u1f9c\u1f9d\u1f9e\u1f9f\u1fa8\u1fa9\u1faa\u1fab\u1fac\u1fad"
    "\u1fae\u1faf\u1fb8\u1fb9\u1fba\u1fbb\u1fbc\u1fbe\u1fc8\u1fc9\u1fca\u1fcb\u1fcc\u1fd8\u1fd9\u1fda"
    "\u1fdb\u1fe8\u1fe9\u1fea\u1feb\u1fec\u1ff8\u1ff9\u1ffa\u1ffb\u1ffc\u2126\u212a\u212b\u2132\u2160"
    "\u2161\u2162\u2163\u2164\u2165\u2166\u2167\u2168\u2169\u216a\u216b\u216c\u216d\u216e\u216f\u2183"
    "\u2c00\u2c01\u2c02\u2c03\u2c04\u2c05\u2c06\u2c07\u2c08\u2c09\u2c0a\u2c0b\u2c0c\u2c0d\u2c0e\u2c0f"
    "\u2c10\u2c11\u2c12\u2c13\u2c14\u2c15\u2c16\u2c17\u2c18\u2c19\u2c1a\u2c1b\u2c1c\u2c1d\u2c1e\u2c1f"
    "\u2c20\u2c21\u2c22\u2c23\u2c24\u2c25\u2c26\u2c27\u2c28\u2c29\u2c2a\u2c2b\u2c2c\u2c2d\u2c2e\u2c60"
    "\u2c62\u2c63\u2c64\u2c67\u2c69\u2c6b\u2c6d\u2c6e\u2c6f\u2c70\u2c72\u2c75\u2c7e\u2c7f\u2c80\u2c82"
    "\u2c84\u2c86\u2c88\u2c8a\u2c8c\u2c8e\u2c90\u2c92\u2c94\u2c96\u2c98\u2c9a\u2c9c\u2c9e\u2ca0\u2ca2"
    "\u2ca4\u2ca6\u2ca8\u2caa\u2cac\u2cae\u2cb0\u2cb2\u2cb4\u2cb6\u2cb8\u2cba\u2cbc\u2cbe\u2cc0\u2cc2"
    "\u2cc4\u2cc6\u2cc8\u2cca\u2ccc\u2cce\u2cd0\u2cd2\u2cd4\u2cd6\u2cd8\u2cda\u2cdc\u2cde\u2ce0\u2ce2"
    "\u2ceb\u2ced\u2cf2\ua640\ua642\ua644\ua646\ua648\ua64a\ua64c\ua64e\ua650\ua652\ua654\ua656\ua658"
    "\ua65a\ua65c\ua65e\ua660\ua662\ua664\ua666\ua668\ua66a\ua66c\ua680\ua682\ua684\ua686\ua688\ua68a"
    "\ua68c\ua68e\ua690\ua692\ua694\ua696\ua722\ua724\ua726\ua728\ua72a\ua72c\ua72e\ua732\ua734\ua736"
    "\ua738\ua73a\ua73c\ua73e\ua740\ua742\ua744\ua746\ua748\ua74a\ua74c\ua74e\ua750\ua752\ua754\ua756"
    "\ua758\ua75a\ua75c\ua75e\ua760\ua762\ua764\ua766\ua768\ua76a\ua76c\ua76e\ua779\ua77b\ua77d\ua77e"
    "\ua780\ua782\ua784\ua786\ua78b\ua78d\ua790\ua792\ua7a0\ua7a2\ua7a4\ua7a6\ua7a8\ua7aa\uff21\uff22"
    "\uff23\uff24\uff25\uff26\uff27\uff28\uff29\uff2a\uff2b\uff2c\uff2d\uff2e\uff2f\uff30\uff31\uff32"
    "\uff33\uff34\uff35\uff36\uff37\uff38\uff39\uff3a\U00010400\U00010401\U00010402\U00010403\U00010404\U00010405\U00010406\U00010407"
    "\U00010408\U00010409\U0001040a\U0001040b\U0001040c\U0001040d\U0001040e\U0001040f\U00010410\U00010411\U00010412\U00010413\U00010414\U00010415\U00010416\U00010417"
    "\U00010418\U00010419\U0001041a\U0001041b\U0001041c\U0001041d\U0001041e\U0001041f\U00010420\U00010421\U00010422\U00010423\U00010424\U00010425\U00010426\U00010427"
)
INTO = (
    "\u03bc\u0061\u0061\u0061\u0061\u0061\u0061\u00e6\u0063\u0065\u0065\u0065\u0065\u0069\u0069\u0069"
    "\u0069\u00f0\u006e\u006f\u006f\u006f\u006f\u006f\u00f8\u0075\u0075\u0075\u0075\u0079\u00fe\u0061"
    "\u0061\u0061\u0061\u0061\u0061\u0063\u0065\u0065\u0065\u0065\u0069\u0069\u0069\u0069\u006e\u006f"
    "\u006f\u006f\u006f\u006f\u0075\u0075\u0075\u0075\u0079\u0079\u0061\u0061\u0061\u0061\u0061\u0061"
    "\u0063\u0063\u0063\u0063\u0063\u0063\u0063\u0063\u0064\u0064\u0111\u0065\u0065\u0065\u0065\u0065"
    "\u0065\u0065\u0065\u0065\u0065\u0067\u0067\u0067\u0067\u0067\u0067\u0067\u0067\u0068\u0068\u0127"
    "\u0069\u0069\u0069\u0069\u0069\u0069\u0069\u0069\u0069\u0133\u006a\u006a\u006b\u006b\u006c\u006c"
    "\u006c\u006c\u006c\u006c\u0140\u0142\u006e\u006e\u006e\u006e\u006e\u006e\u014b\u006f\u006f\u006f"
    "\u006f\u006f\u006f\u0153\u0072\u0072\u0072\u0072\u0072\u0072\u0073\u0073\u0073\u0073\u0073\u0073"
    "\u0073\u0073\u0074\u0074\u0074\u0074\u0167\u0075\u0075\u0075\u0075\u0075\u0075\u0075\u0075\u0075"
    "\u0075\u0075\u0075\u0077\u0077\u0079\u0079\u0079\u007a\u007a\u007a\u007a\u007a\u007a\u0073\u0253"
    "\u0183\u0185\u0254\u0188\u0256\u0257\u018c\u01dd\u0259\u025b\u0192\u0260\u0263\u0269\u0268\u0199"
    "\u026f\u0272\u0275\u006f\u006f\u01a3\u01a5\u0280\u01a8\u0283\u01ad\u0288\u0075\u0075\u028a\u028b"
    "\u01b4\u01b6\u0292\u01b9\u01bd\u01c6\u01c6\u01c9\u01c9\u01cc\u01cc\u0061\u0061\u0069\u0069\u006f"
    "\u006f\u0075\u0075\u0075\u0075\u0075\u0075\u0075\u0075\u0075\u0075\u0061\u0061\u01e1\u01e3\u01e5"
    "\u0067\u0067\u006b\u006b\u006f\u006f\u006f\u006f\u01ef\u006a\u01f3\u01f3\u0067\u0067\u0195\u01bf"
    "\u006e\u006e\u0061\u0061\u01fd\u01ff\u0061\u0061\u0061\u0061\u0065\u0065\u0065\u0065\u0069\u0069"
    "\u0069\u0069\u006f\u006f\u006f\u006f\u0072\u0072\u0072\u0072\u0075\u0075\u0075\u0075\u0073\u0073"
    "\u0074\u0074\u021d\u0068\u0068\u019e\u0223\u0225\u0061\u0061\u0065\u0065\u006f\u006f\u006f\u006f"
    "\u006f\u006f\u006f\u006f\u0079\u0079\u2c65\u023c\u019a\u2c66\u0242\u0180\u0289\u028c\u0247\u0249"
    "\u024b\u024d\u024f\u0371\u0373\u0377\u03ac\u03ad\u03ae\u03af\u03cc\u03cd\u03ce\u03b1\u03b2\u03b3"
    "\u03b4\u03b5\u03b6\u03b7\u03b8\u03b9\u03ba\u03bb\u03bc\u03bd\u03be\u03bf\u03c0\u03c1\u03c3\u03c4"
    "\u03c5\u03c6\u03c7\u03c8\u03c9\u03ca\u03cb\u03c3\u03d7\u03b2\u03b8\u03c6\u03c0\u03d9\u03db\u03dd"
    "\u03df\u03e1\u03e3\u03e5\u03e7\u03e9\u03eb\u03ed\u03ef\u03ba\u03c1\u03b8\u03b5\u03f8\u03f2\u03fb"
    "\u037b\u037c\u037d\u0450\u0451\u0452\u0453\u0454\u0455\u0456\u0457\u0458\u0459\u045a\u045b\u045c"
    "\u045d\u045e\u045f\u0430\u0431\u0432\u0433\u0434\u0435\u0436\u0437\u0438\u0439\u043a\u043b\u043c"
    "\u043d\u043e\u043f\u0440\u0441\u0442\u0443\u0444\u0445\u0446\u0447\u0448\u0449\u044a\u044b\u044c"
    "\u044d\u044e\u044f\u0461\u0463\u0465\u0467\u0469\u046b\u046d\u046f\u0471\u0473\u0475\u0477\u0479"
    "\u047b\u047d\u047f\u0481\u048b\u048d\u048f\u0491\u0493\u0495\u0497\u0499\u049b\u049d\u049f\u04a1"
    "\u04a3\u04a5\u04a7\u04a9\u04ab\u04ad\u04af\u04b1\u04b3\u04b5\u04b7\u04b9\u04bb\u04bd\u04bf\u04cf"
    "\u04c2\u04c4\u04c6\u04c8\u04ca\u04cc\u04ce\u04d1\u04d3\u04d5\u04d7\u04d9\u04db\u04dd\u04df\u04e1"
    "\u04e3\u04e5\u04e7\u04e9\u04eb\u04ed\u04ef\u04f1\u04f3\u04f5\u04f7\u04f9\u04fb\u04fd\u04ff\u0501"
    "\u0503\u0505\u0507\u0509\u050b\u050d\u050f\u0511\u0513\u0515\u0517\u0519\u051b\u051d\u051f\u0521"
    "\u0523\u0525\u0527\u0561\u0562\u0563\u0564\u0565\u0566\u0567\u0568\u0569\u056a\u056b\u056c\u056d"
    "\u056e\u056f\u0570\u0571\u0572\u0573\u0574\u0575\u0576\u0577\u0578\u0579\u057a\u057b\u057c\u057d"
    "\u057e\u057f\u0580\u0581\u0582\u0583\u0584\u0585\u0586\u2d00\u2d01\u2d02\u2d03\u2d04\u2d05\u2d06"
    "\u2d07\u2d08\u2d09\u2d0a\u2d0b\u2d0c\u2d0d\u2d0e\u2d0f\u2d10\u2d11\u2d12\u2d13\u2d14\u2d15\u2d16"
    "\u2d17\u2d18\u2d19\u2d1a\u2d1b\u2d1c\u2d1d\u2d1e\u2d1f\u2d20\u2d21\u2d22\u2d23\u2d24\u2d25\u2d27"
    "\u2d2d\u0061\u0061\u0062\u0062\u0062\u0062\u0062\u0062\u0063\u0063\u0064\u0064\u0064\u0064\u0064"
    "\u0064\u0064\u0064\u0064\u0064\u0065\u0065\u0065\u0065\u0065\u0065\u0065\u0065\u0065\u0065\u0066"
    "\u0066\u0067\u0067\u0068\u0068\u0068\u0068\u0068\u0068\u0068\u0068\u0068\u0068\u0069\u0069\u0069"
    "\u0069\u006b\u006b\u006b\u006b\u006b\u006b\u006c\u006c\u006c\u006c\u006c\u006c\u006c\u006c\u006d"
    "\u006d\u006d\u006d\u006d\u006d\u006e\u006e\u006e\u006e\u006e\u006e\u006e\u006e\u006f\u006f\u006f"
    "\u006f\u006f\u006f\u006f\u006f\u0070\u0070\u0070\u0070\u0072\u0072\u0072\u0072\u0072\u0072\u0072"
    "\u0072\u0073\u0073\u0073\u0073\u0073\u0073\u0073\u0073\u0073\u0073\u0074\u0074\u0074\u0074\u0074"
    "\u0074\u0074\u0074\u0075\u0075\u0075\u0075\u0075\u0075\u0075\u0075\u0075\u0075\u0076\u0076\u0076"
    "\u0076\u0077\u0077\u0077\u0077\u0077\u0077\u0077\u0077\u0077\u0077\u0078\u0078\u0078\u0078\u0079"
    "\u0079\u007a\u007a\u007a\u007a\u007a\u007a\u0068\u0074\u0077\u0079\u0073\u00df\u0061\u0061\u0061"
    "\u0061\u0061\u0061\u0061\u0061\u0061\u0061\u0061\u0061\u0061\u0061\u0061\u0061\u0061\u0061\u0061"
    "\u0061\u0061\u0061\u0061\u0061\u0065\u0065\u0065\u0065\u0065\u0065\u0065\u0065\u0065\u0065\u0065"
    "\u0065\u0065\u0065\u0065\u0065\u0069\u0069\u0069\u0069\u006f\u006f\u006f\u006f\u006f\u006f\u006f"
    "\u006f\u006f\u006f\u006f\u006f\u006f\u006f\u006f\u006f\u006f\u006f\u006f\u006f\u006f\u006f\u006f"
    "\u006f\u0075\u0075\u0075\u0075\u0075\u0075\u0075\u0075\u0075\u0075\u0075\u0075\u0075\u0075\u0079"
    "\u0079\u0079\u0079\u0079\u0079\u0079\u0079\u1efb\u1efd\u1eff\u1f00\u1f01\u1f02\u1f03\u1f04\u1f05"
    "\u1f06\u1f07\u1f10\u1f11\u1f12\u1f13\u1f14\u1f15\u1f20\u1f21\u1f22\u1f23\u1f24\u1f25\u1f26\u1f27"
    "\u1f30\u1f31\u1f32\u1f33\u1f34\u1f35\u1f36\u1f37\u1f40\u1f41\u1f42\u1f43\u1f44\u1f45\u1f51\u1f53"
    "\u1f55\u1f57\u1f60\u1f61\u1f62\u1f63\u1f64\u1f65\u1f66\u1f67\u1f80\u1f81\u1f82\u1f83\u1f84\u1f85"
    "\u1f86\u1f87\u1f90\u1f91\u1f92\u1f93\u1f94\u1f95\u1f96\u1f97\u1fa0\u1fa1\u1fa2\u1fa3\u1fa4\u1fa5"
    "\u1fa6\u1fa7\u1fb0\u1fb1\u1f70\u1f71\u1fb3\u03b9\u1f72\u1f73\u1f74\u1f75\u1fc3\u1fd0\u1fd1\u1f76"
    "\u1f77\u1fe0\u1fe1\u1f7a\u1f7b\u1fe5\u1f78\u1f79\u1f7c\u1f7d\u1ff3\u03c9\u006b\u0061\u214e\u2170"
    "\u2171\u2172\u2173\u2174\u2175\u2176\u2177\u2178\u2179\u217a\u217b\u217c\u217d\u217e\u217f\u2184"
    "\u2c30\u2c31\u2c32\u2c33\u2c34\u2c35\u2c36\u2c37\u2c38\u2c39\u2c3a\u2c3b\u2c3c\u2c3d\u2c3e\u2c3f"
    "\u2c40\u2c41\u2c42\u2c43\u2c44\u2c45\u2c46\u2c47\u2c48\u2c49\u2c4a\u2c4b\u2c4c\u2c4d\u2c4e\u2c4f"
    "\u2c50\u2c51\u2c52\u2c53\u2c54\u2c55\u2c56\u2c57\u2c58\u2c59\u2c5a\u2c5b\u2c5c\u2c5d\u2c5e\u2c61"
    "\u026b\u1d7d\u027d\u2c68\u2c6a\u2c6c\u0251\u0271\u0250\u0252\u2c73\u2c76\u023f\u0240\u2c81\u2c83"
    "\u2c85\u2c87\u2c89\u2c8b\u2c8d\u2c8f\u2c91\u2c93\u2c95\u2c97\u2c99\u2c9b\u2c9d\u2c9f\u2ca1\u2ca3"
    "\u2ca5\u2ca7\u2ca9\u2cab\u2cad\u2caf\u2cb1\u2cb3\u2cb5\u2cb7\u2cb9\u2cbb\u2cbd\u2cbf\u2cc1\u2cc3"
    "\u2cc5\u2cc7\u2cc9\u2ccb\u2ccd\u2ccf\u2cd1\u2cd3\u2cd5\u2cd7\u2cd9\u2cdb\u2cdd\u2cdf\u2ce1\u2ce3"
    "\u2cec\u2cee\u2cf3\ua641\ua643\ua645\ua647\ua649\ua64b\ua64d\ua64f\ua651\ua653\ua655\ua657\ua659"
    "\ua65b\ua65d\ua65f\ua661\ua663\ua665\ua667\ua669\ua66b\ua66d\ua681\ua683\ua685\ua687\ua689\ua68b"
    "\ua68d\ua68f\ua691\ua693\ua695\ua697\ua723\ua725\ua727\ua729\ua72b\ua72d\ua72f\ua733\ua735\ua737"
    "\ua739\ua73b\ua73d\ua73f\ua741\ua743\ua745\ua747\ua749\ua74b\ua74d\ua74f\ua751\ua753\ua755\ua757"
    "\ua759\ua75b\ua75d\ua75f\ua761\ua763\ua765\ua767\ua769\ua76b\ua76d\ua76f\ua77a\ua77c\u1d79\ua77f"
    "\ua781\ua783\ua785\ua787\ua78c\u0265\ua791\ua793\ua7a1\ua7a3\ua7a5\ua7a7\ua7a9\u0266\uff41\uff42"
    "\uff43\uff44\uff45\uff46\uff47\uff48\uff49\uff4a\uff4b\uff4c\uff4d\uff4e\uff4f\uff50\uff51\uff52"
    "\uff53\uff54\uff55\uff56\uff57\uff58\uff59\uff5a\U00010428\U00010429\U0001042a\U0001042b\U0001042c\U0001042d\U0001042e\U0001042f"
    "\U00010430\U00010431\U00010432\U00010433\U00010434\U00010435\U00010436\U00010437\U00010438\U00010439\U0001043a\U0001043b\U0001043c\U0001043d\U0001043e\U0001043f"
    "\U00010440\U00010441\U00010442\U00010443\U00010444\U00010445\U00010446\U00010447\U00010448\U00010449\U0001044a\U0001044b\U0001044c\U0001044d\U0001044e\U0001044f"
)
# Code points FTS5 folds to nothing (combining diacritical marks).
DROPPED = (
    "\u0300\u0301\u0302\u0303\u0304\u0306\u0307\u0308\u0309\u030a\u030b\u030c\u030f\u0311\u031b\u0323"
    "\u0324\u0325\u0326\u0327\u0328\u032d\u032e\u0330\u0331"
)
