package catalog

import "strings"

// RootFieldName returns the GraphQL root field of the API with the given id: the id
// lowercased with hyphens removed (naming rule 1, see the package documentation). A
// name that would start with a digit gets a leading underscore, as rule 4 requires of
// every GraphQL name:
//
//	RootFieldName("date-info")      == "dateinfo"
//	RootFieldName("uuid-generator") == "uuidgenerator"
func RootFieldName(apiID string) string {
	return GraphQLName(strings.ReplaceAll(strings.ToLower(apiID), "-", ""))
}

// GraphQLName returns the GraphQL name of a REST field or parameter name, by rules 2 to 4
// of the package documentation:
//
//  2. each of - + : . / \ becomes an underscore;
//  3. any other character that is not an ASCII letter, digit or underscore is dropped
//     (underscores count as alphanumeric and are kept, so "delay_ms" stays as it is);
//  4. a name that starts with a digit gets a leading underscore.
//
// For example "day-of-week" becomes "day_of_week", "quarter/year" becomes
// "quarter_year", "1st-of-month" becomes "_1st_of_month" and "is leap year" becomes
// "isleapyear". The result can be empty, or start with the "__" that GraphQL reserves;
// [Compile] refuses such names, and names that collide after mapping.
func GraphQLName(name string) string {
	var b strings.Builder
	b.Grow(len(name) + 1)
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '-' || c == '+' || c == ':' || c == '.' || c == '/' || c == '\\':
			b.WriteByte('_')
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9':
			b.WriteByte(c)
		}
	}
	s := b.String()
	if s != "" && '0' <= s[0] && s[0] <= '9' {
		s = "_" + s
	}
	return s
}

// checkGraphQLName reports why the GraphQL name of a REST name is unusable, or "" when it
// is fine.
func checkGraphQLName(gql string) string {
	switch {
	case gql == "":
		return "has no letters or digits left after the GraphQL naming rules"
	case strings.HasPrefix(gql, "__"):
		return "maps to GraphQL name " + gql + ", and names starting with __ are reserved by GraphQL"
	}
	return ""
}
